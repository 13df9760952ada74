"""Amounts staff enter have the API's bounds (apps/common/amounts.py): a balance adjustment, a
reversal and a fee refund are refused with a clear message when asked for (admin, CLI) and again when applied, and a
request that cannot be applied is refused at approval, stays rejectable, and never answers 500."""

import io
import json

import pytest
from django.contrib.admin import helpers
from django.core.management import CommandError, call_command

from apps.common.amounts import MAX_AMOUNT
from apps.common.models import StaffRequest
from apps.common.staff_requests import StaffRequestRefused, staff_request_approve, staff_request_create
from tests.payout.conftest import PHP_FEE, balances, money_snapshot, payout_in, staff_user
from tests.support.staff import admin_login

pytestmark = pytest.mark.django_db

REQUESTS = "/admin/common/staffrequest/"
BIGINT_MAX = 2**63 - 1


def run(*args) -> dict:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


def adjustment(ctx, amount) -> dict:
    return {"merchant_no": ctx.merchant_no, "currency": "PHP", "amount": amount}


@pytest.mark.parametrize("amount", [10**20, BIGINT_MAX, MAX_AMOUNT + 1, -(MAX_AMOUNT + 1), 0, "100", 1.5])
def test_a_balance_adjustment_out_of_bounds_is_refused_when_asked_for(funded, amount):
    with pytest.raises(StaffRequestRefused, match="integer of minor units"):
        staff_request_create(kind=StaffRequest.Kind.BALANCE_ADJUSTMENT, requested_by=staff_user("otto",
                             "Payout operations"), reason="r", payload=adjustment(funded, amount))
    assert not StaffRequest.objects.exists()


def test_the_admin_form_refuses_an_adjustment_out_of_bounds(client, funded):
    admin_login(client, staff_user("otto", "Payout operations"))
    response = client.post(f"{REQUESTS}add/", {"merchant_no": funded.merchant_no, "currency": "PHP",
                                                "amount": str(10**20), "reason": "typo"})
    assert response.status_code == 200
    assert f"less than or equal to {MAX_AMOUNT}" in response.content.decode()
    assert not StaffRequest.objects.exists()


def test_a_stored_request_that_cannot_be_applied_is_refused_at_approval_and_can_be_rejected(client, funded):
    """A request asked for before the bounds (10**20 overflowed bigint: the approval answered 500, and the request
    stayed PENDING for good)."""
    otto, olga = staff_user("otto", "Payout operations"), staff_user("olga", "Payout operations")
    stored = StaffRequest.objects.create(kind=StaffRequest.Kind.BALANCE_ADJUSTMENT, requested_by=otto,
                                         payload=adjustment(funded, 10**20), summary="Credit", reason="typo")
    before = money_snapshot(funded)
    with pytest.raises(ValueError, match="integer of minor units"):  # the service's own check, at apply time
        staff_request_approve(request_id=stored.pk, approver=olga, reason="ok")

    admin_login(client, olga)
    approve = {"action": "approve_selected", helpers.ACTION_CHECKBOX_NAME: [stored.pk], "apply": "1",
               "reason": "ok"}
    response = client.post(REQUESTS, approve, follow=True)
    assert response.status_code == 200
    assert f"Request #{stored.pk} refused" in response.content.decode()
    assert StaffRequest.objects.get(pk=stored.pk).status == "PENDING" and money_snapshot(funded) == before

    response = client.post(REQUESTS, {**approve, "action": "reject_selected", "reason": "amount typed wrong"},
                           follow=True)
    assert response.status_code == 200
    assert StaffRequest.objects.get(pk=stored.pk).status == "REJECTED" and money_snapshot(funded) == before


@pytest.mark.parametrize("amount", [str(BIGINT_MAX), str(10**20), str(MAX_AMOUNT + 1), str(-BIGINT_MAX)])
def test_adjust_balance_cli_refuses_an_amount_out_of_bounds_with_an_error(funded, amount):
    before = money_snapshot(funded)
    with pytest.raises(CommandError, match="integer of minor units"):
        run("adjust_balance", funded.merchant_no, "PHP", amount, "--reason", "typo")
    assert money_snapshot(funded) == before


def test_a_credit_that_would_take_available_beyond_the_bounds_is_refused(funded):
    available = balances(funded)["available"]
    run("adjust_balance", funded.merchant_no, "PHP", str(MAX_AMOUNT - available), "--reason", "the most there is")
    assert balances(funded)["available"] == MAX_AMOUNT
    before = money_snapshot(funded)
    with pytest.raises(CommandError, match=f"above {MAX_AMOUNT}"):
        run("adjust_balance", funded.merchant_no, "PHP", "1", "--reason", "one more")
    assert money_snapshot(funded) == before


@pytest.mark.parametrize(("reversal", "fee_refund"), [(10**20, 0), (1, 10**20), ("100", 0), (1, -1), (0, 0)])
def test_a_reversal_out_of_bounds_is_refused_when_asked_for(funded, adapter_calls, reversal, fee_refund):
    payout = payout_in(funded, "SUCCESS", amount=20_000)
    with pytest.raises(StaffRequestRefused, match="must be an integer of minor units"):
        staff_request_create(kind=StaffRequest.Kind.PAYOUT_REVERSAL, requested_by=staff_user("otto",
                             "Payout operations"), reason="r",
                             payload={"payout_id": payout.pk, "reversal_amount": reversal, "fee_refund": fee_refund})
    assert not StaffRequest.objects.exists()


def test_reverse_payout_cli_refuses_amounts_out_of_bounds_with_an_error(funded, adapter_calls):
    payout = payout_in(funded, "SUCCESS", amount=20_000)
    before = money_snapshot(funded)
    for amount, fee in ((BIGINT_MAX, 0), (20_000, BIGINT_MAX), (-1, 0)):
        with pytest.raises(CommandError, match="must be between"):
            run("reverse_payout", payout.platform_order_no, "--amount", str(amount), "--fee-refund", str(fee))
    assert money_snapshot(funded) == before
    assert run("reverse_payout", payout.platform_order_no, "--amount", "20000", "--fee-refund", str(PHP_FEE))
