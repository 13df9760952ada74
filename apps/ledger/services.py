"""Every balance movement goes through `post`: balanced legs, accounts locked in primary-key order.

`post` checks the legs and calls the PostgreSQL function `ledger_post` (migration ledger 0004) once: accounts found
or created, merchant accounts locked in primary-key order, the insufficient-funds refusal, the posting, its entries and
the merchant balances, in the caller's transaction (docs/ledger.md, "How a posting is written"). Callers run inside
their own `transaction.atomic(durable=True)` service, lock the business row first (order, hold), then post (the one
lock order: docs/ledger.md, "Lock order and retries"); a replay is refused by the (kind, cause) uniqueness of
postings. The database refuses what must never happen whatever the code does (docs/ledger.md): a posting that does
not sum to zero (deferred trigger), a change to a posting or entry (immutability triggers), a merchant balance below
zero (CHECK constraint).
"""

import uuid
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.common import audit
from apps.common.amounts import MAX_AMOUNT, AmountOutOfBounds, signed_amount_check
from apps.common.errors import DomainError, ErrorCode
from apps.common.models import mark_saved
from apps.common.refcache import refcache_get
from apps.common.replica import lag_tolerant
from apps.common.retry import retry_conflicts
from apps.currencies.formatting import money
from apps.currencies.selectors import currency_get
from apps.ledger.models import MERCHANT_KINDS, AccountKind, Hold, LedgerAccount, Posting, Statement
from apps.ledger.selectors import merchant_balances, statement_merchants_with_movements
from apps.ledger.statements import (SignedStatement, day_bounds, day_is_closed, statement_body, statement_sign,
                                    statement_today)
from apps.merchants.models import Merchant, MerchantCurrency
from apps.merchants.selectors import platform_key_current, platform_private_key


class LedgerError(Exception):
    pass


class UnbalancedPosting(LedgerError):
    pass


class DuplicatePosting(LedgerError):
    pass


class HoldAlreadyResolved(LedgerError):
    pass


class InsufficientFunds(DomainError):
    def __init__(self, account: LedgerAccount, needed: int):
        self.account = account
        self.needed = needed
        super().__init__(ErrorCode.INSUFFICIENT_BALANCE,
                         f"Available balance is lower than the {needed} requested in {account.currency_id}.")


@dataclass(frozen=True)
class Leg:
    """One side of a posting: which account (merchant or platform) and the signed amount."""

    kind: AccountKind
    amount: int
    merchant_id: int | None = None


Owner = tuple[int | None, str]  # (merchant_id or None for the platform, account kind)


def _check_owner(merchant_id: int | None, kind: str) -> None:
    """Merchant kinds belong to a merchant, platform kinds to no merchant."""
    if (merchant_id is None) == (kind in MERCHANT_KINDS):
        raise LedgerError(f"account kind {kind} does not belong to {'a merchant' if merchant_id else 'the platform'}")


def account_get_or_create(*, merchant_id: int | None, currency: str, kind: AccountKind) -> LedgerAccount:
    _check_owner(merchant_id, kind)
    try:
        with transaction.atomic():
            account, _ = LedgerAccount.objects.get_or_create(merchant_id=merchant_id, currency_id=currency, kind=kind)
    except IntegrityError:  # created concurrently by another transaction
        account = LedgerAccount.objects.get(merchant_id=merchant_id, currency_id=currency, kind=kind)
    return account


def platform_account(*, currency: str, kind: AccountKind) -> LedgerAccount | None:
    """The platform's account of a currency and kind (reference data, cached per process), None before its first
    use."""
    return refcache_get(("ledger.platform_account", currency, kind), lambda: LedgerAccount.objects.filter(
        merchant__isnull=True, currency_id=currency, kind=kind).first())


# The one way to post: the PostgreSQL function of migration ledger 0004 (0005: the hold's id may be given; docs/ledger.md,
# "How a posting is written").
_LEDGER_POST = ("SELECT posting_id, hold_id, short_account_id, short_merchant_id, short_kind, short_balance, "
                "short_needed FROM ledger_post(%s::text, %s::text, %s::text, %s::bigint, %s::text, %s::timestamptz, "
                "%s::bigint[], %s::text[], %s::bigint[], %s::bigint, %s::bigint)")


def post(*, kind: str, cause: str, currency: str, legs: list[Leg], merchant_id: int | None = None,
         memo: str = "") -> Posting:
    """Record one balanced posting and move the cached balances of its merchant accounts, under their row locks.

    One call of the database function `ledger_post` (migration ledger 0004), in the caller's transaction: it finds or
    creates the legs' accounts, locks the merchant accounts in primary-key order, refuses a merchant account going
    below zero having written nothing (InsufficientFunds here), inserts the posting and its entries and moves the
    merchant balances. DuplicatePosting for a (kind, cause) already posted (callers hold the business row's lock, so
    only a bug gets there twice)."""
    posting = _posting_new(kind=kind, cause=cause, currency=currency, legs=legs, merchant_id=merchant_id, memo=memo)
    _post(posting, legs)
    return posting


def _posting_new(*, kind: str, cause: str, currency: str, legs: list[Leg], merchant_id: int | None,
                 memo: str) -> Posting:
    """The posting's checks and its instance, before `_post` takes any lock: from the call of `ledger_post` to COMMIT
    the merchant's balance rows are locked and every posting of the merchant waits for them, so no model instance is
    built in that window (docs/performance.md, "Measured changes")."""
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        raise LedgerError("ledger postings must run inside a transaction")
    if len(legs) < 2:
        raise UnbalancedPosting("a posting needs at least two legs")
    for leg in legs:
        if type(leg.amount) is not int or leg.amount == 0:
            raise UnbalancedPosting(f"leg amounts are non-zero integers, got {leg.amount!r}")
        _check_owner(leg.merchant_id, leg.kind)
    if sum(leg.amount for leg in legs) != 0:
        raise UnbalancedPosting(f"legs of {kind}:{cause} sum to {sum(leg.amount for leg in legs)}, not 0")
    return mark_saved(Posting(kind=kind, cause=cause, merchant_id=merchant_id, currency_id=currency, memo=memo,
                           created_at=timezone.now()), connection.alias)


def _post(posting: Posting, legs: list[Leg], *, hold: Hold | None = None) -> None:
    """The one way to post: one call of `ledger_post` for `posting` (from `_posting_new`), which gets its id; with
    `hold` (hold_place only) the hold is recorded by the same call, under `hold.pk` when the caller drew it, and
    gets its id and `placed_by`."""
    try:
        with transaction.get_connection().cursor() as cursor:
            cursor.execute(_LEDGER_POST, [posting.kind, posting.cause, posting.currency_id, posting.merchant_id,
                                          posting.memo, posting.created_at, [leg.merchant_id for leg in legs],
                                          [str(leg.kind) for leg in legs], [leg.amount for leg in legs],
                                          None if hold is None else hold.amount, None if hold is None else hold.pk])
            posting_id, hold_id, short_id, short_merchant_id, short_kind, short_balance, short_needed = (
                cursor.fetchone())
    except IntegrityError as exc:  # the caller's transaction is aborted either way; name the usual cause
        if getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None) == "ledger_posting_unique_cause":
            raise DuplicatePosting(f"{posting.kind}:{posting.cause} was already posted") from exc
        raise
    if posting_id is None:  # refused under the accounts' locks, nothing written: the transaction goes on
        short = LedgerAccount(pk=short_id, merchant_id=short_merchant_id, currency_id=posting.currency_id,
                              kind=short_kind, balance=short_balance)
        raise InsufficientFunds(short, short_needed)
    posting.pk = posting_id
    if hold is not None:
        hold.pk = hold_id
        hold.placed_by_id = posting_id


# --- holds: placed (available → frozen), then resolved exactly once ----------------------------------------


def hold_place(*, merchant_id: int, currency: str, amount: int, cause: str, memo: str = "",
               hold_id: int | None = None) -> Hold:
    """Move `amount` from available to frozen and record the hold; InsufficientFunds if available is short.
    One call of `ledger_post`: the posting and the hold row it places, under `hold_id` when the caller drew it already
    (a payout's, NextHoldId), else the next id."""
    legs = [Leg(AccountKind.AVAILABLE, -amount, merchant_id), Leg(AccountKind.FROZEN, amount, merchant_id)]
    posting = _posting_new(kind="hold.place", cause=cause, currency=currency, merchant_id=merchant_id, memo=memo,
                           legs=legs)
    hold = mark_saved(Hold(pk=hold_id, merchant_id=merchant_id, currency_id=currency, amount=amount, cause=cause,
                        status=Hold.Status.HELD, placed_by=posting, created_at=posting.created_at),
                   posting._state.db)
    _post(posting, legs, hold=hold)
    return hold


def _lock_held(hold_id: int) -> Hold:
    hold = Hold.objects.select_for_update().get(pk=hold_id)
    if hold.status != Hold.Status.HELD:
        raise HoldAlreadyResolved(f"hold {hold.cause} is already {hold.status}")
    return hold


def _resolve(hold: Hold, status: Hold.Status, posting: Posting) -> Hold:
    hold.status = status
    hold.resolved_by = posting
    hold.resolved_at = timezone.now()
    hold.save(update_fields=["status", "resolved_by", "resolved_at"])
    return hold


def hold_release(*, hold_id: int, memo: str = "") -> Hold:
    """Give the held funds back to available (payout failed or rejected). Once only."""
    hold = _lock_held(hold_id)
    posting = post(
        kind="hold.release", cause=hold.cause, currency=hold.currency_id, merchant_id=hold.merchant_id, memo=memo,
        legs=[Leg(AccountKind.FROZEN, -hold.amount, hold.merchant_id),
              Leg(AccountKind.AVAILABLE, hold.amount, hold.merchant_id)],
    )
    return _resolve(hold, Hold.Status.RELEASED, posting)


def hold_settle(*, hold_id: int, destinations: list[Leg], memo: str = "") -> Hold:
    """Let the held funds leave to platform accounts (payout paid: amount to clearing, fee to revenue). Once only."""
    hold = _lock_held(hold_id)
    if sum(leg.amount for leg in destinations) != hold.amount:
        raise UnbalancedPosting(f"settlement of hold {hold.cause} must distribute exactly {hold.amount}")
    posting = post(
        kind="hold.settle", cause=hold.cause, currency=hold.currency_id, merchant_id=hold.merchant_id, memo=memo,
        legs=[Leg(AccountKind.FROZEN, -hold.amount, hold.merchant_id), *destinations],
    )
    return _resolve(hold, Hold.Status.SETTLED, posting)


# --- operations ----------------------------------------------------------------------------------------------


@retry_conflicts
@transaction.atomic(durable=True)
def balance_adjust(*, merchant_no: str, currency: str, amount: int, reason: str, actor=None) -> dict:
    """Ops credit (positive) or debit (negative) of available against the adjustments account, audited.
    The CLI's entry (docs/api.md, "Operations CLI"); in the admin it is a staff request approved by a second person."""
    return balance_adjust_in_transaction(merchant_no=merchant_no, currency=currency, amount=amount, reason=reason,
                                         actor=actor)


def _amount_text(amount: int, currency: str) -> str:
    """An amount in a message to staff: in the currency's format, and the minor units they typed ("₱30.01 PHP
    (3001 minor units)")."""
    return f"{money(amount, currency_get(currency))} ({amount} minor units)"


def balance_adjust_in_transaction(*, merchant_no: str, currency: str, amount: int, reason: str, actor=None) -> dict:
    """The adjustment inside the caller's transaction (an approved staff request, apps.common.staff_requests)."""
    if not reason.strip():
        raise ValueError("a reason is required")
    signed_amount_check(amount)
    merchant = Merchant.objects.filter(merchant_no=merchant_no).first()
    if merchant is None:
        raise ValueError(f"unknown merchant {merchant_no}")
    if not MerchantCurrency.objects.filter(merchant=merchant, currency_id=currency, is_enabled=True).exists():
        raise ValueError(f"currency {currency} is not enabled for merchant {merchant_no}")
    reference = uuid.uuid4().hex
    try:
        post(kind="adjustment", cause=reference, currency=currency, merchant_id=merchant.pk, memo=reason.strip(),
             legs=[Leg(AccountKind.ADJUSTMENTS, -amount), Leg(AccountKind.AVAILABLE, amount, merchant.pk)])
    except InsufficientFunds:
        raise ValueError(f"debit of {_amount_text(-amount, currency)} would make available {currency} "
                         f"negative") from None
    audit.record(actor=actor, actor_label=None if actor else "cli", action="balance.adjust", obj=merchant,
                 new={"currency": currency, "amount": amount, "reference": reference}, reason=reason.strip())
    balances = merchant_balances(merchant_id=merchant.pk, currency=currency)
    if balances["available"] > MAX_AMOUNT:  # raised inside the caller's transaction: the posting is rolled back
        raise AmountOutOfBounds(f"a credit of {_amount_text(amount, currency)} would take available {currency} "
                                f"above {MAX_AMOUNT} minor units")
    return {"merchant_no": merchant_no, "currency": currency, "available": balances["available"],
            "settling": balances["settling"], "reference": reference}


# --- daily statements (docs/api.md, "Statements") ---------------------------------------------------------


def _from_stored(stored: Statement, merchant_no: str) -> SignedStatement:
    return SignedStatement(merchant_no, stored.currency_id, stored.date, stored.csv_text, stored.digest,
                           stored.signature, stored.key_version)


def _statement_build(*, merchant: Merchant, currency: str, day: date,
                     now: datetime | None) -> tuple[SignedStatement, bool]:
    """The stored statement if there is one; else built and signed with the current platform key, and stored when
    the day is closed and had movements. Returns it and whether this call stored it."""
    stored = statement_stored(merchant=merchant, currency=currency, day=day)
    if stored is not None:
        return stored, False
    closed = day_is_closed(day, now)
    # A day not closed yet (today) gives a provisional statement, which says so in its closing rows.
    body, movements = statement_body(merchant_id=merchant.pk, currency=currency, day=day, final=closed)
    key = platform_key_current()
    if key is None:
        raise RuntimeError("no current platform key: run `manage.py bootstrap`")
    signed = statement_sign(merchant_no=merchant.merchant_no, currency=currency, day=day, body=body,
                            key_version=key.version, private_key=platform_private_key(key))
    if not movements or not closed:
        return signed, False  # today's changes, and a quiet day costs a row per request: built each time
    try:
        with transaction.atomic():
            Statement.objects.create(merchant=merchant, currency_id=currency, date=day, csv_text=signed.csv_text,
                                     digest=signed.digest, signature=signed.signature, key_version=signed.key_version)
    except IntegrityError:  # stored meanwhile by the task or another request: serve that one, as every later call will
        stored = Statement.objects.get(merchant=merchant, currency_id=currency, date=day)
        return _from_stored(stored, merchant.merchant_no), False
    return signed, True


def statement_stored(*, merchant: Merchant, currency: str, day: date) -> SignedStatement | None:
    """The statement stored for a closed day, or None: a stored statement never changes, so any copy of the database
    that has it serves it."""
    stored = Statement.objects.filter(merchant=merchant, currency_id=currency, date=day).first()
    return _from_stored(stored, merchant.merchant_no) if stored is not None else None


def statement_get(*, merchant: Merchant, currency: str, day: date, now: datetime | None = None) -> SignedStatement:
    """A merchant's signed statement of one day and currency: the stored one when present, else built now."""
    return _statement_build(merchant=merchant, currency=currency, day=day, now=now)[0]


def statement_read(*, merchant: Merchant, currency: str, day: date) -> SignedStatement:
    """statement_get for the merchant who downloads it: a stored statement from the replica when it has it
    (docs/architecture.md, "Where reads go"), else statement_get on the primary, which builds it or finds it."""
    return (lag_tolerant(lambda reads: statement_stored(merchant=merchant, currency=currency, day=day))
            or statement_get(merchant=merchant, currency=currency, day=day))


def statements_prepare(*, day: date | None = None, now: datetime | None = None) -> int:
    """Store the statement of `day` (default: yesterday in SETTLEMENT_TIME_ZONE) of every merchant and currency
    that had movements that day, once: returns how many this call stored (0 when run again, or before the day
    is closed)."""
    day = day or statement_today(now) - timedelta(days=1)
    if not day_is_closed(day, now):
        return 0
    start, end = day_bounds(day)
    done = set(Statement.objects.filter(date=day).values_list("merchant_id", "currency_id"))
    todo = [pair for pair in statement_merchants_with_movements(start=start, end=end) if pair not in done]
    merchants = Merchant.objects.in_bulk({merchant_id for merchant_id, _ in todo})
    return sum(_statement_build(merchant=merchants[merchant_id], currency=currency, day=day, now=now)[1]
               for merchant_id, currency in todo)
