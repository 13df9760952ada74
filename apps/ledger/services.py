"""Every balance movement goes through `post`: balanced legs, accounts locked in primary-key order.

Callers run inside their own `transaction.atomic(durable=True)` service, lock the business row first
(order, hold), then post; a replay is refused by the (kind, cause) uniqueness of postings.
"""

import uuid
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from apps.common import audit
from apps.common.db import Batch, Rows, model_insert
from apps.common.errors import DomainError, ErrorCode
from apps.ledger.models import MERCHANT_KINDS, AccountKind, Entry, Hold, LedgerAccount, Posting
from apps.ledger.selectors import merchant_balances
from apps.merchants.models import Merchant, MerchantCurrency


class LedgerError(Exception):
    pass


class UnbalancedPosting(LedgerError):
    pass


class DuplicatePosting(LedgerError):
    pass


class HoldAlreadyResolved(LedgerError):
    pass


class PostingAccount(NamedTuple):
    """An account as a posting reads it: a row, not a model instance (a posting only needs these, and builds a few
    on every balance movement). Fields in `_ACCOUNT_COLUMNS` order."""

    pk: int
    merchant_id: int | None
    currency_id: str
    kind: str
    balance: int


class InsufficientFunds(DomainError):
    def __init__(self, account: PostingAccount, needed: int):
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


def _require_transaction() -> None:
    if not transaction.get_connection().in_atomic_block:
        raise LedgerError("ledger postings must run inside a transaction")


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


_ACCOUNT_COLUMNS = ("id", "merchant_id", "currency_id", "kind", "balance")  # PostingAccount's fields, in order


def _accounts_sql(currency: str, owners: set[tuple[int | None, str]], *, lock: bool) -> tuple[str, list]:
    """The accounts of `owners` in `currency`: locked in primary-key order (`lock`), or read as they are."""
    for merchant_id, kind in owners:
        _check_owner(merchant_id, kind)
    # Written out rather than built from Q objects: this runs on every balance movement, under contention.
    pairs, params = [], [currency]
    for merchant_id, kind in sorted(owners, key=lambda owner: (owner[0] or 0, owner[1])):
        if merchant_id is None:
            pairs.append("(merchant_id IS NULL AND kind = %s)")
            params.append(kind)
        else:
            pairs.append("(merchant_id = %s AND kind = %s)")
            params += [merchant_id, kind]
    if not lock:  # a plain read: no order to keep, and no sort to tempt a plan through the primary key
        order = ""
    elif transaction.get_connection().features.has_select_for_update:
        order = " ORDER BY id FOR UPDATE"
    else:
        order = " ORDER BY id"
    return (f"SELECT {', '.join(_ACCOUNT_COLUMNS)} FROM {LedgerAccount._meta.db_table}"
            f" WHERE currency_id = %s AND ({' OR '.join(pairs)}){order}", params)


def _accounts_from(rows: Rows, into: dict[tuple, PostingAccount]) -> None:
    for row in rows:
        account = PostingAccount(*row)
        into[(account.merchant_id, account.kind)] = account


def lock_posting_accounts(*, currency: str, owners: set[tuple[int | None, str]]) -> dict[tuple, PostingAccount]:
    """Lock the accounts of a posting in primary-key order (one query), creating any missing one on first use.

    A fixed lock order means two postings never wait on each other in a cycle.
    """
    sql, params = _accounts_sql(currency, owners, lock=True)
    locked: dict[tuple, PostingAccount] = {}
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(sql, params)
        _accounts_from(cursor.fetchall(), locked)
    missing = owners - locked.keys()
    if missing:
        for merchant_id, kind in sorted(missing, key=lambda owner: (owner[0] or 0, owner[1])):
            account_get_or_create(merchant_id=merchant_id, currency=currency, kind=kind)
        return lock_posting_accounts(currency=currency, owners=owners)
    return locked


def accounts_read(*, currency: str, owners: set[tuple[int | None, str]], batch: Batch) -> dict[tuple, PostingAccount]:
    """The accounts of a posting, not locked, read in `batch` (filled when it runs), for `post(accounts=...)`.
    Their balances are not used: `post` locks the rows itself, by primary key. A missing account makes `post` lock
    (and create) at once instead of batching; so does a batch that runs each statement at once (SQLite), where this
    reads nothing."""
    found: dict[tuple, PostingAccount] = {}
    if batch.deferred:
        sql, params = _accounts_sql(currency, owners, lock=False)
        batch.add(sql, params, lambda rows: _accounts_from(rows, found))
    return found


@lru_cache(maxsize=8)
def _lock_by_id_sql(count: int) -> str:
    """Lock `count` accounts known by primary key, in primary-key order (the batched posting's lock): a prepared
    statement whose plan is the primary key's, whatever the table's size."""
    return (f"SELECT id FROM {LedgerAccount._meta.db_table} WHERE id IN ({', '.join(['%s'] * count)})"
            f" ORDER BY id FOR UPDATE")


def post(*, kind: str, cause: str, currency: str, legs: list[Leg], merchant_id: int | None = None,
         memo: str = "", accounts: dict[tuple, PostingAccount] | None = None, posting_id: int | None = None,
         batch: Batch | None = None) -> Posting:
    """Record one balanced posting and update the cached balances of its accounts.

    For a caller that batches its statements (payout create, PostgreSQL): `accounts` read by `accounts_read`,
    `posting_id` reserved, and `batch`. The lock (by primary key, in its order) and the posting join the batch as
    its last statements (`locking`), after the rows the caller writes beside it, so the accounts stay locked only
    while those two run and COMMIT; the balances are checked by the database's non-negative CHECK, whose violation
    the batch raises as InsufficientFunds."""
    _require_transaction()
    if len(legs) < 2:
        raise UnbalancedPosting("a posting needs at least two legs")
    for leg in legs:
        if type(leg.amount) is not int or leg.amount == 0:
            raise UnbalancedPosting(f"leg amounts are non-zero integers, got {leg.amount!r}")
    if sum(leg.amount for leg in legs) != 0:
        raise UnbalancedPosting(f"legs of {kind}:{cause} sum to {sum(leg.amount for leg in legs)}, not 0")

    owners = {(leg.merchant_id, leg.kind) for leg in legs}
    deferred = batch is not None and batch.deferred and accounts is not None and owners <= accounts.keys()
    locked = accounts if deferred else lock_posting_accounts(currency=currency, owners=owners)
    deltas: dict[int, int] = {}
    for leg in legs:
        account = locked[(leg.merchant_id, leg.kind)]
        deltas[account.pk] = deltas.get(account.pk, 0) + leg.amount
    refusal = _refusal(kind, cause, [account for account in locked.values() if deltas[account.pk] < 0], deltas)
    if not deferred:
        for account in locked.values():
            if account.merchant_id is not None and account.balance + deltas[account.pk] < 0:
                raise InsufficientFunds(account, -deltas[account.pk])

    posting = Posting(pk=posting_id, kind=kind, cause=cause, currency_id=currency, merchant_id=merchant_id, memo=memo,
                      created_at=timezone.now())
    entries = [(locked[(leg.merchant_id, leg.kind)].pk, leg.amount) for leg in legs]  # (account id, amount)
    if deferred:
        # Last in the batch (`locking`): the rows the caller writes beside the posting go first.
        batch.add(_lock_by_id_sql(len(deltas)), sorted(deltas), locking=True)
        batch.refuse(refusal)
        _write_one_statement(posting, entries, deltas, batch)
        return posting
    # A replay of (kind, cause) is refused by the unique constraint; callers hold the business row's lock, so
    # only a bug gets here twice, and the IntegrityError aborts the caller's whole transaction.
    try:
        if transaction.get_connection().vendor == "postgresql":
            _write_one_statement(posting, entries, deltas, None)
        else:
            _write_orm(posting, entries, deltas)
    except IntegrityError as exc:
        if (refused := refusal(exc)) is not None:
            raise refused from exc
        raise
    return posting


def _refusal(kind: str, cause: str, debited: list[PostingAccount], deltas: dict[int, int]):
    """What a posting's IntegrityError means: a replayed (kind, cause), or (checked by the database, when the
    posting was batched) a merchant account that would go negative."""

    def translate(exc: IntegrityError) -> Exception | None:
        constraint = getattr(getattr(exc.__cause__, "diag", None), "constraint_name", "") or ""
        if constraint == "ledger_posting_unique_cause" or "ledger_posting.kind, ledger_posting.cause" in str(exc):
            return DuplicatePosting(f"{kind}:{cause} was already posted")
        if constraint == "ledger_merchant_balance_non_negative":
            short = next((account for account in debited if account.merchant_id is not None), None)
            if short is not None:
                return InsufficientFunds(short, -deltas[short.pk])
        return None

    return translate


# The posting, its entries and the balance changes in one round trip (PostgreSQL), while the accounts are
# locked: on the hottest path (one merchant's payouts queue on its available row) every round trip under the
# lock counts. The database still checks everything: the zero-sum trigger at commit, the non-negative CHECK.
# Each balance is updated by its primary key in a statement of its own (one per account): a batched posting is a
# prepared statement, and a join to a list of ids could keep, for the session, a plan made while the accounts
# table was small (a scan of every account).
@lru_cache(maxsize=8)
def _post_sql(accounts: int) -> str:
    balances = ",\n".join(
        f"""balance_{n} AS (
    UPDATE {LedgerAccount._meta.db_table} SET balance = balance + %(delta_{n})s, updated_at = %(now)s
     WHERE id = %(account_{n})s
)""" for n in range(accounts))
    return f"""
WITH posting AS (
    INSERT INTO {Posting._meta.db_table} (id, kind, cause, merchant_id, currency_id, memo, created_at)
    VALUES (COALESCE(%(id)s, nextval(pg_get_serial_sequence('{Posting._meta.db_table}', 'id'))),
            %(kind)s, %(cause)s, %(merchant_id)s, %(currency)s, %(memo)s, %(now)s) RETURNING id
), entries AS (
    INSERT INTO {Entry._meta.db_table} (posting_id, account_id, currency_id, amount)
    SELECT posting.id, leg.account_id, %(currency)s, leg.amount
      FROM posting, unnest(%(entry_accounts)s::bigint[], %(entry_amounts)s::bigint[]) WITH ORDINALITY
           AS leg(account_id, amount, n)
     ORDER BY leg.n
),
{balances}
SELECT id FROM posting
"""


def _write_one_statement(posting: Posting, entries: list[tuple[int, int]], deltas: dict[int, int],
                         batch: Batch | None) -> None:
    def written(rows: Rows) -> None:
        posting.pk = rows[0][0]
        posting._state.adding = False

    params = {
        "id": posting.pk, "kind": posting.kind, "cause": posting.cause, "merchant_id": posting.merchant_id,
        "currency": posting.currency_id, "memo": posting.memo, "now": posting.created_at,
        "entry_accounts": [account_id for account_id, _ in entries],
        "entry_amounts": [amount for _, amount in entries],
    }
    for n, (account_id, delta) in enumerate(sorted(deltas.items())):
        params[f"account_{n}"], params[f"delta_{n}"] = account_id, delta
    sql = _post_sql(len(deltas))
    if batch is not None:
        batch.add(sql, params, written, locking=True)
        return
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(sql, params)
        written(cursor.fetchall())


def _write_orm(posting: Posting, entries: list[tuple[int, int]], deltas: dict[int, int]) -> None:
    """The same writes through the ORM, for SQLite (the embedded development default); they run at once (on SQLite
    a caller's batch runs each statement as it is added anyway)."""
    posting.save(force_insert=True)
    Entry.objects.bulk_create(Entry(posting=posting, account_id=account_id, currency_id=posting.currency_id,
                                    amount=amount) for account_id, amount in entries)
    for account_id, delta in deltas.items():
        LedgerAccount.objects.filter(pk=account_id).update(balance=F("balance") + delta, updated_at=posting.created_at)


def hold_place(*, merchant_id: int, currency: str, amount: int, cause: str, memo: str = "",
               accounts: dict[tuple, PostingAccount] | None = None, ids: list[int | None] | None = None,
               batch: Batch | None = None) -> Hold:
    """Move `amount` from available to frozen and record the hold; InsufficientFunds if available is short.

    For a caller that batches its statements (payout create): `accounts` from `hold_accounts_read`, `ids` of
    `HOLD_ROWS` from `ids_reserve`, and `batch` for the writes (see `post`)."""
    hold_id, posting_id = ids or (None, None)
    posting = post(
        kind="hold.place", cause=cause, currency=currency, merchant_id=merchant_id, memo=memo, accounts=accounts,
        posting_id=posting_id, batch=batch,
        legs=[Leg(AccountKind.AVAILABLE, -amount, merchant_id), Leg(AccountKind.FROZEN, amount, merchant_id)],
    )
    return model_insert(Hold(pk=hold_id, merchant_id=merchant_id, currency_id=currency, amount=amount, cause=cause,
                             placed_by_id=posting.pk), batch=batch)


def hold_accounts_read(*, merchant_id: int, currency: str, batch: Batch) -> dict[tuple, PostingAccount]:
    """The accounts `hold_place` moves money between (available, frozen), read in `batch`: see `accounts_read`."""
    return accounts_read(currency=currency, owners={(merchant_id, AccountKind.AVAILABLE),
                                                    (merchant_id, AccountKind.FROZEN)}, batch=batch)


# The rows `hold_place` writes, in the order of its `ids`: a caller that batches reserves their keys with its own
# in one statement, `ids_reserve(batch, *HOLD_ROWS, ...)`.
HOLD_ROWS = (Hold, Posting)


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


@transaction.atomic(durable=True)
def balance_adjust(*, merchant_no: str, currency: str, amount: int, reason: str, actor=None) -> dict:
    """Ops credit (positive) or debit (negative) of available against the adjustments account, audited."""
    if not reason.strip():
        raise ValueError("a reason is required")
    if type(amount) is not int or amount == 0:
        raise ValueError("amount must be a non-zero integer of minor units")
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
        raise ValueError(f"debit of {-amount} would make available {currency} negative") from None
    audit.record(actor=actor, actor_label=None if actor else "cli", action="balance.adjust", obj=merchant,
                 new={"currency": currency, "amount": amount, "reference": reference}, reason=reason.strip())
    balances = merchant_balances(merchant_id=merchant.pk, currency=currency)
    return {"merchant_no": merchant_no, "currency": currency, "available": balances["available"],
            "settling": balances["settling"], "reference": reference}
