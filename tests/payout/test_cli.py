"""review_payout and reverse_payout (docs/api.md, "Operations CLI"): print the order as payout/query; refuse and
change nothing."""

import getpass
import io
import json

import pytest
from django.core.management import CommandError, call_command

from apps.common.models import AuditLog
from apps.payout.models import Payout
from tests.payout.conftest import PHP_FEE, PHP_THRESHOLD, balances, money_snapshot, payout_in
from tests.support.wait import wait_until

pytestmark = pytest.mark.django_db


def _backends_waiting_on_a_lock() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND wait_event_type = 'Lock'")
        return cursor.fetchone()[0]


def run(*args) -> dict:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return json.loads(out.getvalue())


def test_review_payout_approve_prints_the_order(funded, adapter_calls):
    payout = payout_in(funded, "FROZEN")
    data = run("review_payout", payout.platform_order_no, "--approve")
    assert data == {"platform_order_no": payout.platform_order_no, "mch_order_no": payout.mch_order_no,
                    "amount": PHP_THRESHOLD, "fee": PHP_FEE, "currency": "PHP", "status": "APPROVED"}
    assert AuditLog.objects.get(action="payout.approve").actor_label == f"cli:{getpass.getuser()}"  # the OS user


def test_review_payout_records_the_named_operator_and_keeps_its_output(funded, adapter_calls):
    payout = payout_in(funded, "FROZEN")
    data = run("review_payout", payout.platform_order_no, "--approve", "--operator", "maria")
    assert data["status"] == "APPROVED" and "operator" not in data
    assert AuditLog.objects.get(action="payout.approve").actor_label == "cli:maria"
    assert payout.approvals.get().actor_label == "cli:maria"


def test_review_payout_reject_releases_funds_and_prints_fail_reason(funded):
    payout = payout_in(funded, "FROZEN")
    data = run("review_payout", payout.platform_order_no, "--reject", "--reason", "KYC mismatch")
    assert (data["status"], data["fail_reason"]) == ("REJECTED", "KYC mismatch")
    assert "finished_at" in data
    assert balances(funded)["frozen"] == 0


def test_review_payout_reject_without_reason_fails_and_changes_nothing(funded):
    payout = payout_in(funded, "FROZEN")
    with pytest.raises(CommandError, match="reason"):
        run("review_payout", payout.platform_order_no, "--reject")
    assert Payout.objects.get(pk=payout.pk).status == "FROZEN"


@pytest.mark.parametrize("status, flag", [("APPROVED", "--approve"), ("REJECTED", "--reject"),
                                          ("SUCCESS", "--approve")])
def test_review_payout_of_order_not_frozen_fails_and_changes_nothing(funded, adapter_calls, status, flag):
    payout = payout_in(funded, status)
    before = money_snapshot(funded)
    with pytest.raises(CommandError, match=f"is {status}, not FROZEN"):
        run("review_payout", payout.platform_order_no, flag, "--reason", "x")
    assert (Payout.objects.get(pk=payout.pk).status, money_snapshot(funded)) == (status, before)


def test_review_payout_of_unknown_order_fails(db):
    with pytest.raises(CommandError, match="no payout"):
        run("review_payout", "PONOPE", "--approve")


def test_review_payout_needs_exactly_one_decision(funded):
    payout = payout_in(funded, "FROZEN")
    with pytest.raises(CommandError):
        run("review_payout", payout.platform_order_no, "--approve", "--reject")


def test_reverse_payout_credits_and_prints_reversed_at(funded, adapter_calls):
    payout = payout_in(funded, "SUCCESS", amount=20_000)
    available = balances(funded)["available"]
    data = run("reverse_payout", payout.platform_order_no, "--amount", "20000", "--fee-refund", "500")
    assert (data["status"], isinstance(data["reversed_at"], int)) == ("SUCCESS", True)
    assert balances(funded)["available"] == available + 20_500


@pytest.mark.parametrize("amount, fee_refund", [("0", "0"), ("20001", "0"), ("100", str(PHP_FEE + 1))])
def test_reverse_payout_outside_bounds_fails_and_changes_nothing(funded, adapter_calls, amount, fee_refund):
    payout = payout_in(funded, "SUCCESS", amount=20_000)
    before = money_snapshot(funded)
    with pytest.raises(CommandError, match="between"):
        run("reverse_payout", payout.platform_order_no, "--amount", amount, "--fee-refund", fee_refund)
    assert money_snapshot(funded) == before


@pytest.mark.parametrize("status", ["FAILED", "PROCESSING"])
def test_reverse_payout_of_order_not_success_fails(funded, adapter_calls, status):
    payout = payout_in(funded, status)
    with pytest.raises(CommandError, match="only a SUCCESS payout"):
        run("reverse_payout", payout.platform_order_no, "--amount", "100", "--fee-refund", "0")


def test_reverse_payout_twice_fails_the_second_time(funded, adapter_calls):
    payout = payout_in(funded, "SUCCESS")
    run("reverse_payout", payout.platform_order_no, "--amount", "100", "--fee-refund", "0")
    before = money_snapshot(funded)
    with pytest.raises(CommandError, match="already reversed"):
        run("reverse_payout", payout.platform_order_no, "--amount", "100", "--fee-refund", "0")
    assert money_snapshot(funded) == before


@pytest.mark.django_db(transaction=True)
def test_review_payout_exits_non_zero_when_a_reviewer_decides_the_same_order_at_the_same_moment(funded, adapter_calls):
    """The reviewer's transaction holds the payout row when the command starts; the command waits for it, then finds
    the order APPROVED and must not print success for a decision it did not make."""
    import threading

    from django.db import connections, transaction

    from apps.payout import services

    payout = payout_in(funded, "FROZEN")
    locked, release = threading.Event(), threading.Event()

    def reviewer_in_the_admin():
        try:
            with transaction.atomic():
                services.lock_payout(payout_id=payout.pk)
                locked.set()
                release.wait(10)
                Payout.objects.filter(pk=payout.pk).update(status="APPROVED", review_reason="admin")
                from django.utils import timezone
                Payout.objects.filter(pk=payout.pk).update(reviewed_at=timezone.now())
        finally:
            connections.close_all()

    thread = threading.Thread(target=reviewer_in_the_admin)
    thread.start()
    assert locked.wait(10)

    def release_once_the_command_waits_on_the_row_lock():
        try:
            wait_until(lambda: _backends_waiting_on_a_lock() > 0, timeout=20, what="the command to wait on the lock")
        finally:
            release.set()
            connections.close_all()

    threading.Thread(target=release_once_the_command_waits_on_the_row_lock).start()
    with pytest.raises(CommandError, match="is APPROVED, not FROZEN"):
        run("review_payout", payout.platform_order_no, "--approve")
    thread.join(10)
    assert AuditLog.objects.filter(action="payout.approve", actor_label="cli").count() == 0
