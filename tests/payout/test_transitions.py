"""Every move of docs/api.md, "Payout orders", through the services, the refused ones moving nothing."""

import pytest

from apps.callbacks.models import CallbackEvent
from apps.common.models import AuditLog
from apps.ledger import selectors
from apps.ledger.models import AccountKind, Hold
from apps.payout import services
from apps.payout.models import Payout
from tests.payout.conftest import (FUNDED, PHP_FEE, PHP_THRESHOLD, balances, money_snapshot, new_payout, payout_in,
                                   staff_user)

pytestmark = pytest.mark.django_db

FUNDS = FUNDED


def platform_balance(kind: AccountKind, currency: str = "PHP") -> int:
    return selectors.platform_balance(currency=currency, kind=kind)


def audit_actions(payout: Payout) -> list[str]:
    return list(AuditLog.objects.filter(object_type="payout.payout", object_id=str(payout.pk))
                .order_by("id").values_list("action", flat=True))


def callback(payout: Payout, type_: str) -> CallbackEvent:
    return CallbackEvent.objects.get(platform_order_no=payout.platform_order_no, type=type_)


# --- review ---------------------------------------------------------------------------------------------


def test_approve_moves_frozen_to_approved_and_submits_after_commit(funded, reviewer, adapter_calls,
                                                                   django_capture_on_commit_callbacks):
    payout = payout_in(funded, "FROZEN")
    before = money_snapshot(funded)
    with django_capture_on_commit_callbacks() as dispatched:
        payout = services.payout_approve(payout_id=payout.pk, reviewer=reviewer, reason="known payee")
    assert (payout.status, payout.reviewed_by, payout.review_reason) == ("APPROVED", reviewer, "known payee")
    assert money_snapshot(funded) == before  # approval moves no money; the freeze stays
    assert len(dispatched) == 1  # the submission task, dispatched only after commit
    assert audit_actions(payout)[-1] == "payout.approve"
    log = AuditLog.objects.filter(action="payout.approve").get()
    assert (log.actor, log.reason, log.old, log.new) == (reviewer, "known payee", {"status": "FROZEN"},
                                                         {"status": "APPROVED", "approvals": "1/1"})


def test_approving_twice_moves_nothing_the_second_time(funded, reviewer):
    payout = payout_in(funded, "FROZEN")
    services.payout_approve(payout_id=payout.pk, reviewer=reviewer, reason="ok")
    before = money_snapshot(funded)
    again = services.payout_approve(payout_id=payout.pk, reviewer=reviewer, reason="ok")
    assert again.status == "APPROVED"
    assert money_snapshot(funded) == before
    assert audit_actions(payout).count("payout.approve") == 1


def test_reject_releases_the_freeze_and_enqueues_rejected_callback(funded, reviewer):
    payout = payout_in(funded, "FROZEN")
    assert balances(funded)["available"] == FUNDS - PHP_THRESHOLD - PHP_FEE
    payout = services.payout_reject(payout_id=payout.pk, reviewer=reviewer, reason="payee unverified")
    assert (payout.status, payout.fail_reason, payout.finished_at is not None) == ("REJECTED", "payee unverified", True)
    assert balances(funded) == {"available": FUNDS, "settling": 0, "frozen": 0}
    assert Hold.objects.get(pk=payout.hold_id).status == Hold.Status.RELEASED
    assert callback(payout, "payout.terminal").payload == {
        "platform_order_no": payout.platform_order_no, "mch_order_no": payout.mch_order_no,
        "amount": PHP_THRESHOLD, "fee": PHP_FEE, "currency": "PHP", "status": "REJECTED",
        "fail_reason": "payee unverified"}
    assert AuditLog.objects.get(action="payout.reject").reason == "payee unverified"


def test_rejecting_twice_moves_nothing_the_second_time(funded, reviewer):
    payout = payout_in(funded, "FROZEN")
    services.payout_reject(payout_id=payout.pk, reviewer=reviewer, reason="no")
    before = money_snapshot(funded)
    assert services.payout_reject(payout_id=payout.pk, reviewer=reviewer, reason="no").status == "REJECTED"
    assert money_snapshot(funded) == before
    assert CallbackEvent.objects.filter(platform_order_no=payout.platform_order_no).count() == 1


def test_reject_without_reason_is_refused(funded, reviewer):
    payout = payout_in(funded, "FROZEN")
    with pytest.raises(services.PayoutActionRefused, match="reason"):
        services.payout_reject(payout_id=payout.pk, reviewer=reviewer, reason="  ")
    payout.refresh_from_db()
    assert payout.status == "FROZEN"


@pytest.mark.parametrize("status, decision", [
    ("APPROVED", "reject"), ("PROCESSING", "reject"), ("SUCCESS", "approve"), ("SUCCESS", "reject"),
    ("FAILED", "approve"), ("REJECTED", "approve"), ("PROCESSING", "approve"),
])
def test_review_decision_on_order_not_in_review_is_refused_and_moves_nothing(funded, reviewer, adapter_calls,
                                                                             status, decision):
    payout = payout_in(funded, status)
    before, audits = money_snapshot(funded), audit_actions(payout)
    service = services.payout_approve if decision == "approve" else services.payout_reject
    with pytest.raises(services.PayoutActionRefused, match=f"is {status}"):
        service(payout_id=payout.pk, reviewer=reviewer, reason="r")
    payout.refresh_from_db()
    assert payout.status == status
    assert (money_snapshot(funded), audit_actions(payout)) == (before, audits)


def test_reviewer_who_administers_the_merchant_cannot_decide(funded, reviewer):
    funded.merchant.administrators.add(reviewer)
    payout = payout_in(funded, "FROZEN")
    before = money_snapshot(funded)
    for service in (services.payout_approve, services.payout_reject):
        with pytest.raises(services.PayoutActionRefused, match="administers"):
            service(payout_id=payout.pk, reviewer=reviewer, reason="mine")
    payout.refresh_from_db()
    assert (payout.status, money_snapshot(funded)) == ("FROZEN", before)


def test_staff_without_review_permission_cannot_decide(funded):
    clerk = staff_user("clerk")
    payout = payout_in(funded, "FROZEN")
    with pytest.raises(services.PayoutActionRefused, match="may not review"):
        services.payout_approve(payout_id=payout.pk, reviewer=clerk)


# --- submission and channel results -----------------------------------------------------------------------


def test_submit_moves_approved_to_processing_and_sends_full_account_to_the_adapter(funded, adapter_calls):
    payout = new_payout(funded, payee_account="0012345678")
    payout = services.payout_submit(payout_id=payout.pk)
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", f"REF-{payout.platform_order_no}")
    assert adapter_calls == [(payout.platform_order_no, "0012345678")]
    assert Payout.objects.get(pk=payout.pk).upstream_reference == payout.upstream_reference


@pytest.mark.parametrize("status", ["FROZEN", "PROCESSING", "SUCCESS", "REJECTED"])
def test_submit_of_order_not_approved_does_nothing(funded, adapter_calls, status):
    payout = payout_in(funded, status)
    calls = len(adapter_calls)
    assert services.payout_submit(payout_id=payout.pk).status == status
    assert len(adapter_calls) == calls


def test_paid_result_settles_amount_to_clearing_and_fee_to_revenue(funded, adapter_calls):
    payout = payout_in(funded, "PROCESSING", amount=20_000)
    clearing, revenue = platform_balance(AccountKind.PAYOUT_CLEARING), platform_balance(AccountKind.FEE_REVENUE)
    payout = services.payout_channel_result(platform_order_no=payout.platform_order_no, outcome="paid")
    assert payout.status == "SUCCESS" and payout.finished_at
    assert balances(funded) == {"available": FUNDS - 20_000 - PHP_FEE, "settling": 0, "frozen": 0}
    assert platform_balance(AccountKind.PAYOUT_CLEARING) == clearing + 20_000
    assert platform_balance(AccountKind.FEE_REVENUE) == revenue + PHP_FEE
    assert Hold.objects.get(pk=payout.hold_id).status == Hold.Status.SETTLED
    assert callback(payout, "payout.terminal").payload["status"] == "SUCCESS"
    assert "fail_reason" not in callback(payout, "payout.terminal").payload


def test_paid_result_with_zero_fee_settles_amount_only(funded, adapter_calls):
    from apps.merchants.models import Product
    Product.objects.filter(code="PHP_PAYOUT").update(fee_fixed=0)
    payout = payout_in(funded, "SUCCESS", amount=20_000)
    assert (payout.fee, balances(funded)["available"]) == (0, FUNDS - 20_000)


def test_failed_result_returns_the_freeze_to_available(funded, adapter_calls):
    payout = payout_in(funded, "PROCESSING")
    payout = services.payout_channel_result(platform_order_no=payout.platform_order_no, outcome="failed",
                                            fail_reason="account closed")
    assert (payout.status, payout.fail_reason) == ("FAILED", "account closed")
    assert balances(funded) == {"available": FUNDS, "settling": 0, "frozen": 0}
    assert callback(payout, "payout.terminal").payload["fail_reason"] == "account closed"


@pytest.mark.parametrize("outcome", ["paid", "failed"])
def test_duplicate_channel_result_is_harmless(funded, adapter_calls, outcome):
    payout = payout_in(funded, "PROCESSING")
    services.payout_channel_result(platform_order_no=payout.platform_order_no, outcome=outcome)
    before = money_snapshot(funded)
    services.payout_channel_result(platform_order_no=payout.platform_order_no, outcome=outcome)
    assert money_snapshot(funded) == before


@pytest.mark.parametrize("status, outcome", [("SUCCESS", "failed"), ("FAILED", "paid"), ("APPROVED", "paid"),
                                             ("FROZEN", "failed"), ("REJECTED", "paid")])
def test_conflicting_or_early_channel_result_is_refused_and_moves_nothing(funded, adapter_calls, status, outcome):
    payout = payout_in(funded, status)
    before = money_snapshot(funded)
    with pytest.raises(services.PayoutActionRefused):
        services.payout_channel_result(platform_order_no=payout.platform_order_no, outcome=outcome)
    payout.refresh_from_db()
    assert (payout.status, money_snapshot(funded)) == (status, before)


# --- reversal -------------------------------------------------------------------------------------------


def test_reversal_credits_available_keeps_success_and_enqueues_reversed_callback(funded, adapter_calls, ops_user):
    payout = payout_in(funded, "SUCCESS", amount=30_000)
    available = balances(funded)["available"]
    clearing, revenue = platform_balance(AccountKind.PAYOUT_CLEARING), platform_balance(AccountKind.FEE_REVENUE)
    payout = services.payout_reverse(payout_id=payout.pk, reversal_amount=30_000, fee_refund=PHP_FEE,
                                     actor=ops_user, source="admin", reason="bank return")
    assert (payout.status, payout.reversal_amount, payout.fee_refund) == ("SUCCESS", 30_000, PHP_FEE)
    assert payout.reversed_at is not None
    assert balances(funded)["available"] == available + 30_000 + PHP_FEE
    assert platform_balance(AccountKind.PAYOUT_CLEARING) == clearing - 30_000
    assert platform_balance(AccountKind.FEE_REVENUE) == revenue - PHP_FEE
    body = callback(payout, "payout.reversed").payload
    assert body == {"event": "payout.reversed", "reversed_at": int(payout.reversed_at.timestamp()),
                    "platform_order_no": payout.platform_order_no, "mch_order_no": payout.mch_order_no,
                    "amount": 30_000, "fee": PHP_FEE, "currency": "PHP", "reversal_amount": 30_000,
                    "fee_refund": PHP_FEE}
    assert "status" not in body
    log = AuditLog.objects.get(action="payout.reverse")
    assert (log.actor, log.reason) == (ops_user, "bank return")


def test_partial_reversal_without_fee_refund(funded, adapter_calls):
    payout = payout_in(funded, "SUCCESS", amount=30_000)
    available = balances(funded)["available"]
    services.payout_reverse(payout_id=payout.pk, reversal_amount=1, fee_refund=0)
    assert balances(funded)["available"] == available + 1


@pytest.mark.parametrize("amount, fee_refund", [(0, 0), (30_001, 0), (-1, 0), (30_000, PHP_FEE + 1), (1, -1)])
def test_reversal_outside_bounds_is_refused_and_moves_nothing(funded, adapter_calls, amount, fee_refund):
    payout = payout_in(funded, "SUCCESS", amount=30_000)
    before = money_snapshot(funded)
    with pytest.raises(services.PayoutActionRefused, match="between"):
        services.payout_reverse(payout_id=payout.pk, reversal_amount=amount, fee_refund=fee_refund)
    payout.refresh_from_db()
    assert (payout.reversed_at, money_snapshot(funded)) == (None, before)


def test_reversing_twice_is_refused_and_moves_nothing(funded, adapter_calls):
    payout = payout_in(funded, "SUCCESS")
    services.payout_reverse(payout_id=payout.pk, reversal_amount=100, fee_refund=0)
    before = money_snapshot(funded)
    with pytest.raises(services.PayoutActionRefused, match="already reversed"):
        services.payout_reverse(payout_id=payout.pk, reversal_amount=100, fee_refund=0)
    assert money_snapshot(funded) == before
    assert CallbackEvent.objects.filter(platform_order_no=payout.platform_order_no,
                                        type="payout.reversed").count() == 1


@pytest.mark.parametrize("status", ["FROZEN", "APPROVED", "PROCESSING", "FAILED", "REJECTED"])
def test_reversal_of_order_not_success_is_refused_and_moves_nothing(funded, adapter_calls, status):
    payout = payout_in(funded, status)
    before = money_snapshot(funded)
    with pytest.raises(services.PayoutActionRefused, match="only a SUCCESS payout"):
        services.payout_reverse(payout_id=payout.pk, reversal_amount=100, fee_refund=0)
    assert money_snapshot(funded) == before


def test_staff_without_reverse_permission_cannot_reverse(funded, adapter_calls, reviewer):
    payout = payout_in(funded, "SUCCESS")
    with pytest.raises(services.PayoutActionRefused, match="may not reverse"):
        services.payout_reverse(payout_id=payout.pk, reversal_amount=100, fee_refund=0, actor=reviewer)


def test_channel_return_reverses_in_full_and_a_repeated_notice_is_harmless(funded, adapter_calls):
    payout = payout_in(funded, "SUCCESS", amount=40_000)
    services.payout_channel_returned(platform_order_no=payout.platform_order_no)
    assert balances(funded) == {"available": FUNDS, "settling": 0, "frozen": 0}
    before = money_snapshot(funded)
    again = services.payout_channel_returned(platform_order_no=payout.platform_order_no)
    assert (again.reversal_amount, again.fee_refund, money_snapshot(funded)) == (40_000, PHP_FEE, before)


# --- sweeper --------------------------------------------------------------------------------------------


def test_sweeper_redispatches_only_approved_payouts_left_unsubmitted(funded, adapter_calls, monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from apps.payout import tasks

    dispatched = []
    monkeypatch.setattr(tasks.submit_payout, "delay", dispatched.append)
    stuck = new_payout(funded)
    fresh = new_payout(funded)
    payout_in(funded, "FROZEN")
    Payout.objects.filter(pk=stuck.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
    assert tasks.sweep_stuck_payouts() == 1
    assert dispatched == [stuck.pk]
    tasks.submit_payout(stuck.pk)  # what the worker then runs; twice is harmless
    tasks.submit_payout(stuck.pk)
    assert Payout.objects.get(pk=stuck.pk).status == "PROCESSING"
    assert Payout.objects.get(pk=fresh.pk).status == "APPROVED"
    assert len(adapter_calls) == 1


def test_processing_payout_never_acknowledged_is_sent_again_after_a_minute(funded, adapter_calls):
    from datetime import timedelta

    from django.utils import timezone

    payout = payout_in(funded, "PROCESSING")
    Payout.objects.filter(pk=payout.pk).update(upstream_reference="",
                                               submitted_at=timezone.now() - timedelta(minutes=2))
    services.payout_submit(payout_id=payout.pk)
    assert len(adapter_calls) == 2
    assert Payout.objects.get(pk=payout.pk).upstream_reference


# --- submission after create ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_each_approved_create_is_submitted_after_commit_and_a_frozen_one_waits(funded, adapter_calls, monkeypatch):
    from apps.payout import tasks

    drains = []
    monkeypatch.setattr(tasks.submit_approved_payouts, "delay", lambda: drains.append(1))
    created = [new_payout(funded, payee_account=f"00123456{i}") for i in range(3)]
    frozen = payout_in(funded, "FROZEN")
    assert drains  # a drain queued after commit (the wake mark: docs/payouts.md, "Disbursement")
    assert tasks.submit_approved_payouts() == 3  # what the worker then runs
    assert {Payout.objects.get(pk=p.pk).status for p in created} == {"PROCESSING"}
    assert Payout.objects.get(pk=frozen.pk).status == "FROZEN"  # waits for its reviewer
    assert len(adapter_calls) == 3


@pytest.mark.django_db(transaction=True)
def test_a_create_whose_submission_message_is_lost_is_submitted_by_the_sweeper(funded, adapter_calls, monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from apps.payout import tasks

    monkeypatch.setattr(tasks.submit_approved_payouts, "delay", lambda: None)  # the drain's message never arrives
    lost = new_payout(funded)
    dispatched = []
    monkeypatch.setattr(tasks.submit_payout, "delay", dispatched.append)
    Payout.objects.filter(pk=lost.pk).update(updated_at=timezone.now() - timedelta(seconds=30))
    assert tasks.sweep_stuck_payouts() == 1
    assert dispatched == [lost.pk]
