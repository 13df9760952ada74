"""The double-entry ledger: services keep it balanced, and PostgreSQL refuses what bypasses them."""

import io
import json

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.db.models import F

from apps.ledger.models import AccountKind, Entry, Hold, LedgerAccount, Posting
from apps.ledger.selectors import account_balance, ledger_verify, merchant_balances
from apps.ledger.services import (
    DuplicatePosting,
    HoldAlreadyResolved,
    InsufficientFunds,
    LedgerError,
    Leg,
    UnbalancedPosting,
    account_get_or_create,
    balance_adjust,
    hold_place,
    hold_release,
    hold_settle,
    post,
)
from tests.helpers import at_once


def credit(merchant, amount: int, currency: str = "PHP") -> None:
    balance_adjust(merchant_no=merchant.merchant_no, currency=currency, amount=amount, reason="test credit")


def account(merchant, kind: AccountKind, currency: str = "PHP") -> LedgerAccount:
    merchant_id = merchant.merchant.pk if merchant is not None else None
    return LedgerAccount.objects.get(merchant_id=merchant_id, currency_id=currency, kind=kind)


def balance(merchant, kind: AccountKind, currency: str = "PHP") -> int:
    """The account's balance: cached for a merchant account, the sum of entries for a platform one."""
    return account_balance(account(merchant, kind, currency))


def test_balanced_posting_succeeds_and_updates_cached_balances(merchant):
    mid = merchant.merchant.pk
    with transaction.atomic():
        posting = post(kind="test.credit", cause="c-1", currency="PHP", merchant_id=mid, memo="three legs",
                       legs=[Leg(AccountKind.PAYIN_CLEARING, -1000), Leg(AccountKind.AVAILABLE, 950, mid),
                             Leg(AccountKind.FEE_REVENUE, 50)])
    assert sorted(posting.entries.values_list("amount", flat=True)) == [-1000, 50, 950]
    assert account(merchant, AccountKind.AVAILABLE).balance == 950
    assert balance(None, AccountKind.FEE_REVENUE) == 50
    assert balance(None, AccountKind.PAYIN_CLEARING) == -1000
    assert merchant_balances(merchant_id=mid, currency="PHP") == {"available": 950, "settling": 0, "frozen": 0}


@pytest.mark.parametrize("legs", [
    [Leg(AccountKind.ADJUSTMENTS, -100), Leg(AccountKind.FEE_REVENUE, 99)],
    [Leg(AccountKind.ADJUSTMENTS, -100)],
    [Leg(AccountKind.ADJUSTMENTS, 0), Leg(AccountKind.FEE_REVENUE, 0)],
    [Leg(AccountKind.ADJUSTMENTS, -1.5), Leg(AccountKind.FEE_REVENUE, 1.5)],
])
def test_service_refuses_unbalanced_single_or_non_integer_legs(bootstrapped, legs):
    with pytest.raises(UnbalancedPosting), transaction.atomic():
        post(kind="test.bad", cause="bad-1", currency="PHP", legs=legs)
    assert not Posting.objects.filter(kind="test.bad").exists()


def test_service_refuses_a_merchant_kind_on_a_platform_leg(bootstrapped):
    with pytest.raises(LedgerError), transaction.atomic():
        post(kind="test.bad", cause="bad-2", currency="PHP",
             legs=[Leg(AccountKind.AVAILABLE, -1), Leg(AccountKind.FEE_REVENUE, 1)])


def _raw_accounts(merchant):
    with transaction.atomic():
        available = account_get_or_create(merchant_id=merchant.merchant.pk, currency="PHP", kind=AccountKind.AVAILABLE)
        adjustments = account_get_or_create(merchant_id=None, currency="PHP", kind=AccountKind.ADJUSTMENTS)
    return available, adjustments


@pytest.mark.django_db(transaction=True)
def test_unbalanced_insert_bypassing_the_services_is_refused_by_the_database_at_commit(merchant):
    available, adjustments = _raw_accounts(merchant)
    with pytest.raises(IntegrityError, match="does not balance"):
        with transaction.atomic():
            posting = Posting.objects.create(kind="raw", cause="unbalanced-1", currency_id="PHP")
            Entry.objects.create(posting=posting, account=available, currency_id="PHP", amount=100)
            Entry.objects.create(posting=posting, account=adjustments, currency_id="PHP", amount=-50)
            # Deferred: nothing is refused until the transaction commits.
            assert Entry.objects.filter(posting=posting).count() == 2
    assert not Posting.objects.filter(cause="unbalanced-1").exists()
    assert not Entry.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_unbalanced_insert_in_raw_sql_is_refused_by_the_database_at_commit(merchant):
    available, _ = _raw_accounts(merchant)
    with pytest.raises(IntegrityError, match="does not balance"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("INSERT INTO ledger_posting (kind, cause, currency_id, memo, created_at) "
                           "VALUES ('raw', 'sql-1', 'PHP', '', now()) RETURNING id")
            posting_id = cursor.fetchone()[0]
            cursor.execute("INSERT INTO ledger_entry (posting_id, account_id, currency_id, amount) "
                           "VALUES (%s, %s, 'PHP', 500)", [posting_id, available.pk])
    assert not Posting.objects.filter(cause="sql-1").exists()


@pytest.mark.django_db(transaction=True)
def test_balanced_raw_insert_commits_so_the_trigger_is_what_refuses_unbalanced_ones(merchant):
    available, adjustments = _raw_accounts(merchant)
    with transaction.atomic():
        posting = Posting.objects.create(kind="raw", cause="balanced-1", currency_id="PHP")
        Entry.objects.create(posting=posting, account=available, currency_id="PHP", amount=100)
        Entry.objects.create(posting=posting, account=adjustments, currency_id="PHP", amount=-100)
        # Keep the merchant's cached balance right so the after-test ledger check holds (the platform caches none).
        LedgerAccount.objects.filter(pk=available.pk).update(balance=F("balance") + 100)
    assert Posting.objects.filter(cause="balanced-1").exists()


@pytest.mark.django_db(transaction=True)
def test_entry_in_another_currency_than_its_account_is_refused_by_the_database(merchant):
    available, adjustments = _raw_accounts(merchant)
    with pytest.raises(IntegrityError, match="its account is not"):
        with transaction.atomic():
            posting = Posting.objects.create(kind="raw", cause="mixed-1", currency_id="USD")
            Entry.objects.create(posting=posting, account=available, currency_id="USD", amount=100)
            Entry.objects.create(posting=posting, account=adjustments, currency_id="USD", amount=-100)
    assert not Posting.objects.filter(cause="mixed-1").exists()


def test_entries_and_postings_cannot_be_updated_or_deleted(merchant):
    credit(merchant, 1000)
    entry = Entry.objects.filter(account__merchant=merchant.merchant).get()
    for statement, params in [
        ("UPDATE ledger_entry SET amount = amount + 1 WHERE id = %s", [entry.pk]),
        ("DELETE FROM ledger_entry WHERE id = %s", [entry.pk]),
        ("UPDATE ledger_posting SET cause = 'rewritten' WHERE id = %s", [entry.posting_id]),
        ("DELETE FROM ledger_posting WHERE id = %s", [entry.posting_id]),
    ]:
        with pytest.raises(IntegrityError, match="immutable"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, params)
    with pytest.raises(IntegrityError, match="immutable"), transaction.atomic():
        Entry.objects.filter(pk=entry.pk).update(amount=999)
    with pytest.raises(IntegrityError, match="immutable"), transaction.atomic():
        Entry.objects.filter(pk=entry.pk).delete()
    assert Entry.objects.get(pk=entry.pk).amount == 1000


def test_debit_below_zero_is_refused_by_the_service_and_nothing_moves(merchant):
    credit(merchant, 100)
    mid = merchant.merchant.pk
    with pytest.raises(InsufficientFunds) as excinfo, transaction.atomic():
        post(kind="test.debit", cause="d-1", currency="PHP", merchant_id=mid,
             legs=[Leg(AccountKind.AVAILABLE, -101, mid), Leg(AccountKind.ADJUSTMENTS, 101)])
    assert excinfo.value.error.code == "2003"
    assert account(merchant, AccountKind.AVAILABLE).balance == 100
    assert not Posting.objects.filter(cause="d-1").exists()


def test_negative_merchant_balance_is_refused_by_the_database_check(merchant):
    credit(merchant, 100)
    with pytest.raises(IntegrityError, match="ledger_merchant_balance_non_negative"), transaction.atomic():
        LedgerAccount.objects.filter(pk=account(merchant, AccountKind.AVAILABLE).pk).update(balance=-1)


def test_platform_accounts_may_go_negative(merchant):
    credit(merchant, 100)
    assert balance(None, AccountKind.ADJUSTMENTS) == -100


def test_duplicate_kind_and_cause_is_refused_and_nothing_moves_twice(merchant):
    mid = merchant.merchant.pk
    legs = [Leg(AccountKind.PAYIN_CLEARING, -500), Leg(AccountKind.AVAILABLE, 500, mid)]
    with transaction.atomic():
        post(kind="test.credit", cause="order-1", currency="PHP", merchant_id=mid, legs=legs)
    with pytest.raises(DuplicatePosting), transaction.atomic():
        post(kind="test.credit", cause="order-1", currency="PHP", merchant_id=mid, legs=legs)
    assert account(merchant, AccountKind.AVAILABLE).balance == 500
    # The same cause under another kind is another event.
    with transaction.atomic():
        post(kind="test.refund", cause="order-1", currency="PHP", merchant_id=mid,
             legs=[Leg(AccountKind.AVAILABLE, -500, mid), Leg(AccountKind.PAYIN_CLEARING, 500)])
    # The database refuses the duplicate too, whatever code path tries.
    with pytest.raises(IntegrityError, match="ledger_posting_unique_cause"), transaction.atomic():
        Posting.objects.create(kind="test.credit", cause="order-1", currency_id="PHP")


def test_hold_moves_available_to_frozen_and_is_released_once(merchant):
    credit(merchant, 1000)
    mid = merchant.merchant.pk
    with transaction.atomic():
        hold = hold_place(merchant_id=mid, currency="PHP", amount=400, cause="payout-1")
    assert merchant_balances(merchant_id=mid, currency="PHP") == {"available": 600, "settling": 0, "frozen": 400}
    with transaction.atomic():
        hold_release(hold_id=hold.pk)
    assert merchant_balances(merchant_id=mid, currency="PHP") == {"available": 1000, "settling": 0, "frozen": 0}
    postings = Posting.objects.count()

    with pytest.raises(HoldAlreadyResolved), transaction.atomic():
        hold_settle(hold_id=hold.pk, destinations=[Leg(AccountKind.PAYOUT_CLEARING, 400)])
    with pytest.raises(HoldAlreadyResolved), transaction.atomic():
        hold_release(hold_id=hold.pk)
    assert Posting.objects.count() == postings
    assert merchant_balances(merchant_id=mid, currency="PHP") == {"available": 1000, "settling": 0, "frozen": 0}
    assert Hold.objects.get(pk=hold.pk).status == Hold.Status.RELEASED


def test_hold_settles_once_to_platform_accounts(merchant):
    credit(merchant, 1000)
    mid = merchant.merchant.pk
    with transaction.atomic():
        hold = hold_place(merchant_id=mid, currency="PHP", amount=400, cause="payout-2")
    with pytest.raises(UnbalancedPosting), transaction.atomic():
        hold_settle(hold_id=hold.pk, destinations=[Leg(AccountKind.PAYOUT_CLEARING, 399)])
    with transaction.atomic():
        hold_settle(hold_id=hold.pk, destinations=[Leg(AccountKind.PAYOUT_CLEARING, 390),
                                                   Leg(AccountKind.FEE_REVENUE, 10)])
    assert merchant_balances(merchant_id=mid, currency="PHP") == {"available": 600, "settling": 0, "frozen": 0}
    assert balance(None, AccountKind.FEE_REVENUE) == 10
    with pytest.raises(HoldAlreadyResolved), transaction.atomic():
        hold_release(hold_id=hold.pk)
    assert merchant_balances(merchant_id=mid, currency="PHP")["available"] == 600


def test_hold_is_placed_under_the_id_its_caller_drew(merchant):
    """A payout's INSERT draws its hold's id from the holds' sequence (NextHoldId) before the posting; hold_place then
    inserts the hold under that id, and without one under the sequence's next."""
    credit(merchant, 1000)
    mid = merchant.merchant.pk
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT nextval('ledger_hold_id_seq')")
            drawn = cursor.fetchone()[0]
        hold = hold_place(merchant_id=mid, currency="PHP", amount=400, cause="payout-drawn", hold_id=drawn)
        after = hold_place(merchant_id=mid, currency="PHP", amount=100, cause="payout-next")
    assert hold.pk == drawn and Hold.objects.get(pk=drawn).cause == "payout-drawn"
    assert after.pk > drawn and Hold.objects.get(pk=after.pk).cause == "payout-next"
    assert merchant_balances(merchant_id=mid, currency="PHP") == {"available": 500, "settling": 0, "frozen": 500}


def test_the_posting_function_plans_its_statements_once_per_connection(db):
    """ledger_post runs its statements with generic plans: under plan_cache_mode `auto` PL/pgSQL planned them again
    on every call (their custom plans, knowing the arrays' lengths, always looked cheaper; docs/performance.md,
    "Measured changes")."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT proconfig FROM pg_proc WHERE proname = 'ledger_post'")
        assert cursor.fetchall() == [(["plan_cache_mode=force_generic_plan"],)]


def test_hold_larger_than_available_is_refused(merchant):
    credit(merchant, 100)
    with pytest.raises(InsufficientFunds), transaction.atomic():
        hold_place(merchant_id=merchant.merchant.pk, currency="PHP", amount=101, cause="payout-3")
    assert not Hold.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_posting_outside_a_transaction_is_refused(merchant):
    with pytest.raises(LedgerError, match="inside a transaction"):
        post(kind="test.credit", cause="no-tx", currency="PHP",
             legs=[Leg(AccountKind.PAYIN_CLEARING, -1), Leg(AccountKind.FEE_REVENUE, 1)])


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_debits_never_overdraw_and_conserve_the_total(merchant):
    credit(merchant, 1000)
    mid, threads_count, amount = merchant.merchant.pk, 50, 30

    def debit(i: int) -> str:
        with transaction.atomic(durable=True):
            hold_place(merchant_id=mid, currency="PHP", amount=amount, cause=f"race-{i}")
        return "ok"

    outcomes = [result if exc is None else ("insufficient" if isinstance(exc, InsufficientFunds) else f"error: {exc!r}")
                for result, exc in at_once(debit, threads_count)]
    assert len(outcomes) == threads_count
    assert sorted(set(outcomes)) == ["insufficient", "ok"], outcomes
    succeeded = outcomes.count("ok")
    assert succeeded == 1000 // amount  # 33 fit in 1000, the 34th would overdraw
    balances = merchant_balances(merchant_id=mid, currency="PHP")
    assert balances == {"available": 1000 - succeeded * amount, "settling": 0, "frozen": succeeded * amount}
    assert Hold.objects.filter(merchant_id=mid).count() == succeeded
    assert sum(account_balance(account) for account in LedgerAccount.objects.filter(currency="PHP")) == 0
    assert ledger_verify()["ok"]


def test_verify_ledger_passes_on_a_consistent_ledger(merchant):
    credit(merchant, 1000)
    with transaction.atomic():
        hold_place(merchant_id=merchant.merchant.pk, currency="PHP", amount=10, cause="payout-v")
    out = io.StringIO()
    call_command("verify_ledger", stdout=out)
    report = json.loads(out.getvalue())
    assert report["ok"] is True and report["failures"] == []
    assert report["checks"]["postings"] == 2


@pytest.mark.ledger_tampered
def test_verify_ledger_detects_a_tampered_cached_balance_and_exits_1(merchant):
    credit(merchant, 1000)
    available = account(merchant, AccountKind.AVAILABLE)
    # Cached balances are not immutable (they change with every posting), so an UPDATE goes through.
    LedgerAccount.objects.filter(pk=available.pk).update(balance=F("balance") + 1)
    out = io.StringIO()
    with pytest.raises(SystemExit) as excinfo:
        call_command("verify_ledger", stdout=out)
    assert excinfo.value.code == 1
    report = json.loads(out.getvalue())
    assert report["ok"] is False
    assert {"check": "cached_balance_equals_entries", "account": str(available), "account_id": available.pk,
            "cached": 1001, "entries": 1000} in report["failures"]


@pytest.mark.ledger_tampered
def test_verify_ledger_detects_frozen_money_without_an_open_hold(merchant):
    credit(merchant, 1000)
    with transaction.atomic():
        hold = hold_place(merchant_id=merchant.merchant.pk, currency="PHP", amount=10, cause="payout-t")
    Hold.objects.filter(pk=hold.pk).delete()
    report = ledger_verify()
    assert not report["ok"]
    assert [f["check"] for f in report["failures"]] == ["frozen_equals_open_holds"]


def test_platform_accounts_carry_no_cached_balance_and_the_database_refuses_one(merchant):
    """Every posting of a currency touches the platform's accounts: they are never locked nor updated, so postings
    of different merchants do not queue on them. Their balance is the sum of their entries."""
    credit(merchant, 700)
    adjustments = account(None, AccountKind.ADJUSTMENTS)
    assert adjustments.balance == 0 and account_balance(adjustments) == -700
    assert ledger_verify()["ok"]
    with pytest.raises(IntegrityError, match="ledger_platform_balance_not_cached"), transaction.atomic():
        LedgerAccount.objects.filter(pk=adjustments.pk).update(balance=-700)


@pytest.mark.django_db(transaction=True)
def test_postings_of_two_merchants_do_not_wait_on_the_platform_accounts(merchant, other_merchant):
    """One merchant's posting holds its transaction open; another merchant's posting in the same currency, to the
    same platform account, commits meanwhile (it would wait for the first COMMIT if the platform row were locked)."""
    import threading

    from django.db import connections

    credit(merchant, 1000)
    credit(other_merchant, 1000)
    account_get_or_create(merchant_id=None, currency="PHP", kind=AccountKind.FEE_REVENUE)
    inside, release = threading.Event(), threading.Event()

    def first_merchant_posting_held_open():
        try:
            with transaction.atomic():
                post(kind="test.fee", cause="held-open", currency="PHP", merchant_id=merchant.merchant.pk,
                     legs=[Leg(AccountKind.AVAILABLE, -10, merchant.merchant.pk), Leg(AccountKind.FEE_REVENUE, 10)])
                inside.set()
                release.wait(20)
        finally:
            connections.close_all()

    thread = threading.Thread(target=first_merchant_posting_held_open)
    thread.start()
    try:
        assert inside.wait(20)
        with connections["default"].cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")  # a wait on a locked row fails this test instead of hanging
        with transaction.atomic():
            post(kind="test.fee", cause="meanwhile", currency="PHP", merchant_id=other_merchant.merchant.pk,
                 legs=[Leg(AccountKind.AVAILABLE, -10, other_merchant.merchant.pk), Leg(AccountKind.FEE_REVENUE, 10)])
    finally:
        release.set()
        thread.join(20)
    assert balance(None, AccountKind.FEE_REVENUE) == 20


def test_the_posting_function_refuses_unbalanced_legs_on_its_own(merchant):
    """ledger_post (migration ledger 0004) is the one way to post: it refuses legs that do not sum to zero or carry
    no amount even when called without `post`'s checks, and writes nothing."""
    credit(merchant, 100)
    mid = merchant.merchant.pk
    call = ("SELECT posting_id FROM ledger_post('test.raw', %s, 'PHP', %s, '', now(), %s::bigint[], "
            "%s::text[], %s::bigint[], NULL)")
    for cause, amounts in [("raw-unbalanced", [-10, 9]), ("raw-zero", [0, 0]), ("raw-one-leg", [-10])]:
        legs = len(amounts)
        with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(call, [cause, mid, [mid, None][:legs], ["available", "adjustments"][:legs], amounts])
    assert not Posting.objects.filter(kind="test.raw").exists()
    assert account(merchant, AccountKind.AVAILABLE).balance == 100


def test_a_refused_debit_leaves_the_callers_transaction_usable(merchant):
    """InsufficientFunds is decided under the account's lock with nothing written and no database error: the
    caller's transaction goes on (balance_adjust_in_transaction turns it into its own refusal inside a staff
    request's transaction)."""
    credit(merchant, 100)
    mid = merchant.merchant.pk
    with transaction.atomic():
        with pytest.raises(InsufficientFunds) as excinfo:
            hold_place(merchant_id=mid, currency="PHP", amount=101, cause="payout-short")
        assert excinfo.value.needed == 101 and excinfo.value.account.kind == AccountKind.AVAILABLE
        hold = hold_place(merchant_id=mid, currency="PHP", amount=100, cause="payout-fits")
    assert Hold.objects.get(pk=hold.pk).placed_by.cause == "payout-fits"
    assert merchant_balances(merchant_id=mid, currency="PHP") == {"available": 0, "settling": 0, "frozen": 100}
    assert not Posting.objects.filter(cause="payout-short").exists()
