"""Stranded payouts: a payout whose next step died is found by the sweeper and
finished through the same services, once, whatever else runs at the same moment; what no sweep can finish is
counted as stuck (docs/payouts.md, "Stranded payouts")."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.callbacks.models import CallbackEvent
from apps.channels import sandbox_payout
from apps.channels.models import Channel, SandboxDisbursement
from apps.ledger.models import Hold, Posting
from apps.operations.selectors import stranded_orders
from apps.payout import services, tasks
from apps.payout.models import Payout
from tests.payout.conftest import FUNDED, PHP_FEE, balances, new_payout, payout_in

AMOUNT = 25_000


def stuck(kind: str) -> int:
    return next(figure.count for figure in stranded_orders() if figure.kind.name == kind)


@pytest.fixture
def settlements_lost(monkeypatch):
    """The sandbox bank's settlement and return tasks are lost (a worker died with them, their message is gone)."""
    lost = []
    monkeypatch.setattr(sandbox_payout.sandbox_payout_settle, "apply_async", lambda **kw: lost.append(kw["args"]))
    monkeypatch.setattr(sandbox_payout.sandbox_payout_return, "apply_async", lambda **kw: lost.append(kw["args"]))
    return lost


def submitted_long_ago(payout: Payout, *, minutes: int = 3) -> Payout:
    """The order was submitted (and the sandbox bank accepted it) that long ago."""
    then = timezone.now() - timedelta(minutes=minutes)
    Payout.objects.filter(pk=payout.pk).update(submitted_at=then, updated_at=then)
    SandboxDisbursement.objects.filter(platform_order_no=payout.platform_order_no).update(created_at=then)
    return Payout.objects.get(pk=payout.pk)


def sandbox_processing(ctx, payee_account: str, *, minutes: int = 3) -> Payout:
    payout = new_payout(ctx, amount=AMOUNT, payee_account=payee_account)
    payout = services.payout_submit(payout_id=payout.pk)
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", f"SBX-{payout.platform_order_no}")
    return submitted_long_ago(payout, minutes=minutes)


def events(payout: Payout) -> list[CallbackEvent]:
    return list(CallbackEvent.objects.filter(platform_order_no=payout.platform_order_no).order_by("pk"))


pytestmark = pytest.mark.django_db


def test_a_sandbox_payout_whose_settlement_was_lost_is_paid_by_the_sweeper(funded, settlements_lost):
    payout = sandbox_processing(funded, "0012345678")
    assert settlements_lost and stuck("payout.sandbox_unanswered") == 1
    assert balances(funded)["frozen"] == AMOUNT + PHP_FEE

    tasks.sweep_stuck_payouts()

    payout.refresh_from_db()
    assert payout.status == "SUCCESS" and payout.finished_at
    assert Hold.objects.get(pk=payout.hold_id).status == Hold.Status.SETTLED
    assert balances(funded) == {"available": FUNDED - AMOUNT - PHP_FEE, "settling": 0, "frozen": 0}
    [event] = events(payout)
    assert (event.type, event.payload["status"]) == ("payout.terminal", "SUCCESS")
    assert stuck("payout.sandbox_unanswered") == 0
    tasks.sweep_stuck_payouts()  # again: nothing moves twice
    assert Posting.objects.filter(cause=payout.platform_order_no).count() == 2  # the hold, its settlement
    assert len(events(payout)) == 1


def test_a_sandbox_payout_to_a_closed_account_whose_settlement_was_lost_fails_and_funds_come_back(
        funded, settlements_lost):
    payout = sandbox_processing(funded, "0055554000")
    tasks.sweep_stuck_payouts()
    payout.refresh_from_db()
    assert (payout.status, payout.fail_reason) == ("FAILED", "account closed")
    assert Hold.objects.get(pk=payout.hold_id).status == Hold.Status.RELEASED
    assert balances(funded) == {"available": FUNDED, "settling": 0, "frozen": 0}
    [event] = events(payout)
    assert (event.payload["status"], event.payload["fail_reason"]) == ("FAILED", "account closed")


def test_a_returned_sandbox_payout_whose_settlement_was_lost_is_paid_then_reversed_in_that_order(
        funded, settlements_lost):
    payout = sandbox_processing(funded, "0055554001")
    tasks.sweep_stuck_payouts()
    payout.refresh_from_db()
    assert (payout.status, payout.reversal_amount, payout.fee_refund) == ("SUCCESS", AMOUNT, PHP_FEE)
    assert [e.type for e in events(payout)] == ["payout.terminal", "payout.reversed"]
    assert balances(funded) == {"available": FUNDED, "settling": 0, "frozen": 0}


def test_a_sandbox_return_that_was_lost_is_applied_by_the_sweeper(funded, settlements_lost):
    payout = sandbox_processing(funded, "0055554001")
    sandbox_payout.sandbox_payout_settle(payout.platform_order_no, sandbox_payout.OUTCOME_PAID_THEN_RETURNED)
    assert settlements_lost[-1] == [payout.platform_order_no]  # the return task, lost
    Payout.objects.filter(pk=payout.pk).update(finished_at=timezone.now() - timedelta(minutes=3))
    assert stuck("payout.sandbox_unreturned") == 1

    tasks.sweep_stuck_payouts()

    payout.refresh_from_db()
    assert payout.reversed_at and (payout.reversal_amount, payout.fee_refund) == (AMOUNT, PHP_FEE)
    assert [e.type for e in events(payout)] == ["payout.terminal", "payout.reversed"]
    assert balances(funded) == {"available": FUNDED, "settling": 0, "frozen": 0}
    assert stuck("payout.sandbox_unreturned") == 0


def test_a_sandbox_payout_whose_answer_is_not_yet_overdue_is_left_to_its_task(funded, settlements_lost):
    payout = sandbox_processing(funded, "0012345678", minutes=0)
    tasks.sweep_stuck_payouts()
    assert Payout.objects.get(pk=payout.pk).status == "PROCESSING"
    assert stuck("payout.sandbox_unanswered") == 0


def test_a_payout_waiting_for_a_reviewer_is_neither_touched_nor_stuck(funded):
    frozen = payout_in(funded, "FROZEN")
    Payout.objects.filter(pk=frozen.pk).update(created_at=timezone.now() - timedelta(days=3),
                                               updated_at=timezone.now() - timedelta(days=3))
    before = balances(funded)
    assert tasks.sweep_stuck_payouts() == 0
    assert Payout.objects.get(pk=frozen.pk).status == "FROZEN"
    assert balances(funded) == before
    assert sum(figure.count for figure in stranded_orders()) == 0


def test_a_real_upstreams_payout_still_undecided_after_reconciliation_is_stuck_and_left_to_it(
        funded, adapter_calls, settings):
    payout = payout_in(funded, "PROCESSING")
    settings.PLATFORM_ENVIRONMENT = "live"
    xendit = Channel.objects.create(code="XENDIT_PHP_PAYOUT", name="Xendit", adapter="xendit", direction="payout",
                                    currency_id="PHP")
    waited = settings.CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS + 5 * 60
    Payout.objects.filter(pk=payout.pk).update(channel=xendit,
                                               submitted_at=timezone.now() - timedelta(seconds=waited))
    assert stuck("payout.upstream_unresolved") == 0  # reconciliation has asked only once: still its case
    Payout.objects.filter(pk=payout.pk).update(submitted_at=timezone.now() - timedelta(seconds=waited + 6 * 60))
    assert stuck("payout.upstream_unresolved") == 1
    assert tasks.sweep_stuck_payouts() == 0  # reconciliation goes on asking; no sweep guesses an upstream's answer
    assert Payout.objects.get(pk=payout.pk).status == "PROCESSING"


@pytest.mark.ledger_tampered
def test_a_finished_payout_whose_funds_are_still_frozen_is_stuck_and_critical(funded, adapter_calls):
    payout = payout_in(funded, "SUCCESS")
    Hold.objects.filter(pk=payout.hold_id).update(status=Hold.Status.HELD, resolved_by=None, resolved_at=None)
    [figure] = [f for f in stranded_orders() if f.kind.name == "payout.terminal_hold_open"]
    assert (figure.count, figure.kind.critical) == (1, True)
    assert tasks.sweep_stuck_payouts() == 0  # nobody guesses which posting is missing: an operator looks


def test_the_age_buckets_place_each_stuck_order_by_how_long_it_waited(funded, settlements_lost):
    sandbox_processing(funded, "0012345670", minutes=3)
    sandbox_processing(funded, "0012345671", minutes=30)
    sandbox_processing(funded, "0012345672", minutes=300)
    [figure] = [f for f in stranded_orders() if f.kind.name == "payout.sandbox_unanswered"]
    assert figure.ages == {"under_5m": 1, "5m_to_1h": 1, "over_1h": 1}
    assert timezone.now() - figure.oldest > timedelta(minutes=299)


@pytest.mark.django_db(transaction=True)
def test_the_sweep_and_the_settlement_task_finishing_one_payout_at_once_move_it_once(funded, settlements_lost):
    """The settlement task was only late, not lost: it runs at the moment the sweeper finishes the same order."""
    payouts = [sandbox_processing(funded, f"00123456{n:02d}") for n in range(4)]
    barrier = threading.Barrier(2)
    errors = []

    def run(step):
        try:
            barrier.wait(timeout=10)
            step()
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    def settle_all():
        for payout in payouts:
            sandbox_payout.sandbox_payout_settle(payout.platform_order_no, sandbox_payout.OUTCOME_PAID)

    threads = [threading.Thread(target=run, args=(step,)) for step in (settle_all, tasks.sweep_stuck_payouts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    for payout in payouts:
        payout.refresh_from_db()
        assert payout.status == "SUCCESS"
        assert Posting.objects.filter(cause=payout.platform_order_no, kind="hold.settle").count() == 1
        assert len(events(payout)) == 1
    assert balances(funded) == {"available": FUNDED - 4 * (AMOUNT + PHP_FEE), "settling": 0, "frozen": 0}
