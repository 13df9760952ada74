"""The soak's refund checks (tests/soak/refunds.py, refund_checks), on a real database: they pass on refunds the
service made and fail when an order is refunded beyond what was paid, a refund is stuck PROCESSING, a finished one
keeps its hold, or an answer of the history is not what the database holds."""

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from apps.collection.models import Refund
from apps.collection.refunds import OUTCOME_FAILED, OUTCOME_SUCCEEDED, refund_channel_result, refund_create
from apps.ledger.models import Hold
from tests.collection.test_refunds import paid_order
from tests.soak.harness import History, Op
from tests.soak.refunds import refund_checks

pytestmark = pytest.mark.django_db


@pytest.fixture
def refunded(client, merchant):
    """A paid order of 100,000 with three refunds: SUCCESS 30,000, FAILED 50,000 and PROCESSING 20,000."""
    order = paid_order(client, merchant)
    made = {}
    for number, amount in (("RF-OK", 30_000), ("RF-KO", 50_000), ("RF-WAIT", 20_000)):
        made[number] = refund_create(merchant=merchant.merchant, platform_order_no=order.platform_order_no,
                                     mch_refund_no=number, amount=amount)
    refund_channel_result(refund_no=made["RF-OK"].refund_no, outcome=OUTCOME_SUCCEEDED)
    refund_channel_result(refund_no=made["RF-KO"].refund_no, outcome=OUTCOME_FAILED, fail_reason="closed")
    return SimpleNamespace(order=order, refunds=made, merchant=merchant)


def op(world, number: str, amount: int, outcome: str = "ok", code: str = "0", kind: str = "refund/create",
       **params) -> Op:
    refund = world.refunds.get(number)
    data = {"refund_no": refund.refund_no} if refund is not None and outcome == "ok" else None
    return Op("refunds", kind, number, {"merchant_no": world.merchant.merchant_no, "mch_refund_no": number,
                                                   "platform_order_no": world.order.platform_order_no,
                                                   "amount": amount, **params},
              1.0, 1.2, 200, code, outcome, data)


def checks(ops=()) -> dict:
    return refund_checks(SimpleNamespace(history=History()), list(ops))


def failing(result: dict) -> set[str]:
    return {name for name, check in result.items() if not check["ok"]}


def test_refunds_the_service_made_pass_every_check(refunded):
    ops = [op(refunded, "RF-OK", 30_000), op(refunded, "RF-OK", 30_000),  # a replay, answered with the same refund
           op(refunded, "RF-OK", 30_001, "fail", "2001"),
           op(refunded, "RF-BEYOND", 100_001, "fail", "2008", expect="2008")]
    result = checks(ops)
    assert not failing(result), result
    assert result["refunds_terminal_or_waiting"]["waiting"] == 1  # RF-WAIT, just made: legitimately waiting


def test_an_order_refunded_beyond_what_was_paid_fails(refunded):
    # 30,000 paid back and 20,000 on its way: a FAILED 50,000 counted as paid back would make 100,000, exactly what
    # was paid; one more unit is beyond it.
    Refund.objects.filter(pk=refunded.refunds["RF-KO"].pk).update(status=Refund.Status.SUCCESS)
    assert not failing(checks()) - {"refunds_terminal_or_waiting"}
    Refund.objects.filter(pk=refunded.refunds["RF-KO"].pk).update(amount=50_001)
    result = checks()
    assert "refunds_within_paid" in failing(result)
    assert result["refunds_within_paid"]["beyond_paid"] == [
        {"order": refunded.order.platform_order_no, "paid": 100_000, "refunded": 100_001}]


def test_a_refund_processing_past_the_sweep_s_grace_or_a_finished_one_holding_money_fails(refunded):
    Refund.objects.filter(pk=refunded.refunds["RF-WAIT"].pk).update(created_at=timezone.now() - timedelta(minutes=2))
    result = checks()
    assert failing(result) == {"refunds_terminal_or_waiting"}
    assert [number for number, _ in result["refunds_terminal_or_waiting"]["stuck"]] == [
        refunded.refunds["RF-WAIT"].refund_no]

    # Marked SUCCESS without its hold settled (the database keeps a resolved hold resolved, so only this way round).
    Refund.objects.filter(pk=refunded.refunds["RF-WAIT"].pk).update(status=Refund.Status.SUCCESS,
                                                                    finished_at=timezone.now())
    result = checks()
    assert failing(result) == {"refunds_terminal_or_waiting"}
    assert result["refunds_terminal_or_waiting"]["held_on_terminal"] == [refunded.refunds["RF-WAIT"].refund_no]
    assert Hold.objects.get(pk=refunded.refunds["RF-WAIT"].hold_id).status == Hold.Status.HELD


def test_answers_the_database_does_not_bear_out_fail(refunded):
    for wrong in (op(refunded, "RF-NEVER", 1_000),  # answered as made, absent
                  op(refunded, "RF-OK", 31_000),  # answered as made, stored with another amount
                  op(refunded, "RF-OK", 30_000, "fail", "2001"),  # a conflict, but the stored refund matches
                  op(refunded, "RF-KO", 50_000, "fail", "2008"),  # refused, yet stored and never accepted
                  op(refunded, "RF-BEYOND", 100_001, "ok", "0", expect="2008"),  # beyond what was paid, accepted
                  # an owner's approval in the portal the page said was done, of a refund that is not there
                  op(refunded, "portal-NEVER", 1_000, kind="portal/refund"),
                  # refused on the approval page (2008), yet stored
                  op(refunded, "RF-KO", 50_000, "fail", "2008", kind="portal/refund")):
        result = checks([wrong])
        assert failing(result) == {"refund_history"}, (wrong.params, result)
