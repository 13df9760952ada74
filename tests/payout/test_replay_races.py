"""A merchant replaying payout/create while a reviewer or the channel finishes the order.

A replay that placed a hold (locking the merchant's available and frozen rows) before the unique index told it the
order existed would then wait at its INSERT for the transaction holding the payout row, which waits for those
account rows: a deadlock. The decision is slowed down between its payout row and its ledger movement so that the replays
arrive inside that window every time. Real threads, real PostgreSQL."""

import json
import threading
import time

import pytest
from django.core.management import call_command
from django.test import Client

from apps.ledger import services as ledger_services
from apps.ledger.models import Hold
from apps.payout.models import Payout
from tests.helpers import at_once
from tests.support.wait import wait_until
from tests.payout.conftest import CREATE, PHP_FEE, PHP_THRESHOLD, balances, payout_params
from tests.support.staff import admin_login

pytestmark = pytest.mark.django_db(transaction=True)

REPLAYS = 6


def _slowed(monkeypatch, name: str, entered: threading.Event) -> None:
    """The ledger step of the decision waits a moment after the payout row is locked and written."""
    original = getattr(ledger_services, name)

    def slow(**kwargs):
        entered.set()
        time.sleep(0.4)
        return original(**kwargs)

    monkeypatch.setattr(ledger_services, name, slow)


def _race(merchant, params: dict, decide, entered: threading.Event) -> tuple[object, list[tuple[int, dict]]]:
    """`decide` and REPLAYS identical creates at once; the replays start once the decision holds the row."""
    bodies = [json.dumps(merchant.signed_body(params)) for _ in range(REPLAYS)]

    def actor(index: int):
        if index == 0:
            return decide()
        assert entered.wait(10), "the decision never reached its ledger step"
        response = Client().post(CREATE, data=bodies[index - 1], content_type="application/json")
        return response.status_code, response.json()

    outcomes = at_once(actor, REPLAYS + 1, timeout=60)
    assert [exc for _, exc in outcomes] == [None] * (REPLAYS + 1), [exc for _, exc in outcomes]
    return outcomes[0][0], [result for result, _ in outcomes[1:]]


def _assert_finished_once(merchant, payout: Payout, replies, status: str, caplog) -> None:
    assert {(code, body["code"]) for code, body in replies} == {(200, "0")}, replies
    assert {body["data"]["platform_order_no"] for _, body in replies} == {payout.platform_order_no}
    payout.refresh_from_db()
    assert payout.status == status
    assert Hold.objects.get(pk=payout.hold_id).status != Hold.Status.HELD  # no hold left on a terminal order
    assert Hold.objects.filter(merchant=merchant.merchant).count() == 1  # no replay froze anything
    assert balances(merchant)["frozen"] == 0
    assert "40P01" not in caplog.text and "deadlock" not in caplog.text.lower()


def _created(merchant, **overrides) -> tuple[Payout, dict]:
    params = payout_params(**overrides)
    response = Client().post(CREATE, data=json.dumps(merchant.signed_body(params)), content_type="application/json")
    assert response.json()["code"] == "0"
    return Payout.objects.get(merchant=merchant.merchant, mch_order_no=params["mch_order_no"]), params


def test_replays_during_the_review_cli_reject_neither_deadlock_nor_fail(funded, monkeypatch, caplog):
    payout, params = _created(funded, amount=PHP_THRESHOLD)
    entered = threading.Event()
    _slowed(monkeypatch, "hold_release", entered)

    def reject():
        call_command("review_payout", payout.platform_order_no, "--reject", "--reason", "fraud ring",
                     "--operator", "ops-ana", stdout=open("/dev/null", "w"))
        return "rejected"

    decided, replies = _race(funded, params, reject, entered)
    assert decided == "rejected"
    _assert_finished_once(funded, payout, replies, "REJECTED", caplog)


def test_replays_during_an_admin_reject_neither_deadlock_nor_answer_500(funded, monkeypatch, caplog):
    from tests.payout.conftest import staff_user

    payout, params = _created(funded, amount=PHP_THRESHOLD)
    reviewer = admin_login(Client(), staff_user("rita", "Risk reviewer"))
    entered = threading.Event()
    _slowed(monkeypatch, "hold_release", entered)

    def reject():
        return reviewer.post(f"/admin/payout/payoutreviewqueue/{payout.pk}/decide/",
                             {"decision": "reject", "reason": "payee unknown"}).status_code

    decided, replies = _race(funded, params, reject, entered)
    assert decided == 302  # back to the decision page with the message, not a 500
    _assert_finished_once(funded, payout, replies, "REJECTED", caplog)


def test_replays_during_the_sandbox_settlement_neither_deadlock_nor_strand_the_order(funded, monkeypatch, caplog,
                                                                                     adapter_calls):
    from apps.channels.sandbox_payout import OUTCOME_PAID, sandbox_payout_settle
    from apps.payout.services import payout_submit

    payout, params = _created(funded, amount=10_000)
    payout_submit(payout_id=payout.pk)
    entered = threading.Event()
    _slowed(monkeypatch, "hold_settle", entered)

    def settle():
        sandbox_payout_settle(payout.platform_order_no, OUTCOME_PAID)
        return "settled"

    decided, replies = _race(funded, params, settle, entered)
    assert decided == "settled"
    _assert_finished_once(funded, payout, replies, "SUCCESS", caplog)
    assert balances(funded)["available"] == 100_000_000 - 10_000 - PHP_FEE


def test_two_reviewers_giving_the_second_approval_at_once_are_told_what_each_did(funded):
    """The approval is decided under the row lock and the message says what this call did."""
    from apps.merchants.models import MerchantCurrency
    from apps.payout.services import payout_approve
    from tests.payout.conftest import staff_user

    MerchantCurrency.objects.filter(merchant=funded.merchant, currency_id="PHP").update(
        payout_dual_approval_threshold=6_000_000)
    payout, _ = _created(funded, amount=6_000_000)
    assert payout.approvals_required == 2
    payout_approve(payout_id=payout.pk, reviewer=staff_user("first", "Risk reviewer"), reason="first look")
    clients = [admin_login(Client(), staff_user(name, "Risk reviewer")) for name in ("bea", "cy")]

    def approve(index: int) -> str:
        response = clients[index].post(f"/admin/payout/payoutreviewqueue/{payout.pk}/decide/",
                                       {"decision": "approve", "reason": "payee verified"}, follow=True)
        assert response.status_code == 200
        return response.content.decode()

    pages = [page for page, exc in at_once(approve, 2) if exc is None]
    assert len(pages) == 2
    told_approved = [page for page in pages if f"Payout {payout.platform_order_no} approved: now" in page]
    told_unchanged = [page for page in pages if "was already approved" in page and "nothing changed" in page]
    assert (len(told_approved), len(told_unchanged)) == (1, 1)
    payout.refresh_from_db()
    assert payout.status in ("APPROVED", "PROCESSING")
    assert payout.approvals.filter(decision="APPROVE").count() == 2


def _waits_for_me(cursor) -> bool:
    cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND pg_backend_pid() = ANY("
                   "pg_blocking_pids(pid)))")
    return cursor.fetchone()[0]


def test_a_settlement_task_that_hits_a_deadlock_retries_and_completes(funded, monkeypatch, adapter_calls, caplog):
    """A real deadlock: the task holds the payout row and waits for the accounts, which this test holds while it
    asks for the payout row. PostgreSQL aborts the task's transaction (it waited first); the task runs it again."""
    from django.db import connection, transaction

    from apps.channels.sandbox_payout import OUTCOME_PAID, sandbox_payout_settle
    from apps.ledger.models import LedgerAccount
    from apps.payout.services import payout_submit

    payout, _ = _created(funded, amount=10_000)
    payout_submit(payout_id=payout.pk)
    entered = threading.Event()
    _slowed(monkeypatch, "hold_settle", entered)
    done = {}

    def settle():
        try:
            done["result"] = sandbox_payout_settle.apply(args=[payout.platform_order_no, OUTCOME_PAID]).state
        finally:
            from django.db import connections
            connections.close_all()

    worker = threading.Thread(target=settle)
    worker.start()
    assert entered.wait(10)
    with transaction.atomic():
        list(LedgerAccount.objects.select_for_update().filter(merchant=funded.merchant).order_by("pk"))
        with connection.cursor() as cursor:
            # The task wakes and waits for these rows first (PostgreSQL's pg_locks, live: a fixed sleep lost the race
            # on a loaded machine, and this transaction waited first and was the one aborted)...
            wait_until(lambda: _waits_for_me(cursor), timeout=20, what="the task to wait for the accounts' rows")
            # ... then this transaction waits for the task's payout row: a cycle
            cursor.execute("SELECT 1 FROM payout_payout WHERE id = %s FOR UPDATE", [payout.pk])
    worker.join(30)
    assert done.get("result") == "SUCCESS"
    payout.refresh_from_db()
    assert payout.status == "SUCCESS" and balances(funded)["frozen"] == 0
    assert "40P01 (attempt 1 of 4); retrying" in caplog.text


def test_create_that_keeps_conflicting_answers_1106_not_9999_and_moves_nothing(funded, monkeypatch):
    from django.db import connection

    def conflicting(**kwargs):
        with connection.cursor() as cursor:
            cursor.execute("DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40P01'; END $$")

    monkeypatch.setattr(ledger_services, "hold_place", conflicting)
    before = balances(funded)
    params = payout_params()
    response = Client().post(CREATE, data=json.dumps(funded.signed_body(params)), content_type="application/json")
    assert (response.status_code, response.json()["code"]) == (429, "1106")
    assert "Retry the same request" in response.json()["msg"]
    assert not Payout.objects.filter(mch_order_no=params["mch_order_no"]).exists()
    assert balances(funded) == before


def test_a_replay_takes_no_money_lock_and_a_create_writes_its_order_once(funded):
    """docs/performance.md: the create claims its mch_order_no by inserting the order before the hold, the INSERT
    drawing the hold's id (no UPDATE afterwards to set it), and a replay never reaches the ledger."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    warm_up = json.dumps(funded.signed_body(payout_params(mch_order_no="WARM-UP")))  # loads the reference cache
    assert Client().post(CREATE, data=warm_up, content_type="application/json").json()["code"] == "0"
    params = payout_params()
    bodies = [json.dumps(funded.signed_body(params)) for _ in range(2)]
    with CaptureQueriesContext(connection) as create:
        assert Client().post(CREATE, data=bodies[0], content_type="application/json").json()["code"] == "0"
    with CaptureQueriesContext(connection) as replay:
        assert Client().post(CREATE, data=bodies[1], content_type="application/json").json()["code"] == "0"
    money = [q["sql"] for q in replay.captured_queries if "ledger_" in q["sql"]]
    assert money == [], money  # no account lock, no posting, no hold
    statements = [q["sql"].split()[0] for q in create.captured_queries]
    # The freeze is one call of the ledger's posting function (the two balances moved under their row
    # locks, the posting, its entries and the hold under the id the order's INSERT drew, docs/ledger.md); no ledger
    # statement of the ORM's; the deny list comes from the reference cache; the order row is the create's record (no
    # audit row).
    ledger = [q["sql"] for q in create.captured_queries if "ledger_" in q["sql"]]
    assert len(ledger) == 1 and "FROM ledger_post(" in ledger[0], ledger
    assert statements.count("UPDATE") == 0, statements
    sql = " ".join(q["sql"] for q in create.captured_queries)
    assert "payout_denylistedaccount" not in sql and "common_auditlog" not in sql
    print(f"\npayout/create: {len(create.captured_queries)} statements; replay: {len(replay.captured_queries)}")
