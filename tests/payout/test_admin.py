"""The review queue and the payout pages in the admin (Django test client; the browser test drives the same)."""

import pytest
from django.contrib.admin import helpers

from apps.common.models import AuditLog
from apps.payout.models import DenyListedAccount, Payout
from tests.payout.conftest import PHP_FEE, balances, money_snapshot, payout_in, staff_user
from tests.support.staff import admin_login

pytestmark = pytest.mark.django_db

QUEUE = "/admin/payout/payoutreviewqueue/"
PAYOUTS = "/admin/payout/payout/"
ACCOUNT = "0012349876"


def act(client, url: str, action: str, payouts, **extra):
    return client.post(url, {"action": action, helpers.ACTION_CHECKBOX_NAME: [p.pk for p in payouts], **extra},
                       follow=True)


def test_queue_lists_frozen_payouts_oldest_first_with_masked_payee_and_reasons(client, funded, reviewer,
                                                                               adapter_calls):
    older = payout_in(funded, "FROZEN", payee_account=ACCOUNT)
    newer = payout_in(funded, "FROZEN", payee_account=ACCOUNT)
    approved = payout_in(funded, "APPROVED")
    admin_login(client, reviewer)
    response = client.get(QUEUE)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.index(older.platform_order_no) < html.index(newer.platform_order_no)
    assert approved.platform_order_no not in html
    assert "\u2022\u2022\u2022\u20229876" in html and ACCOUNT not in html
    assert "review threshold" in html and "PHP" in html and funded.merchant_no in html


def test_reviewer_approves_from_the_queue(client, funded, reviewer, django_capture_on_commit_callbacks):
    payout = payout_in(funded, "FROZEN")
    admin_login(client, reviewer)
    with django_capture_on_commit_callbacks() as dispatched:
        response = act(client, QUEUE, "approve_selected", [payout])
    assert "approved" in response.content.decode()
    assert Payout.objects.get(pk=payout.pk).status == "APPROVED"
    assert len(dispatched) == 1


def test_reject_asks_for_a_reason_then_rejects_and_releases(client, funded, reviewer):
    payout = payout_in(funded, "FROZEN")
    admin_login(client, reviewer)
    page = act(client, QUEUE, "reject_selected", [payout])
    assert page.status_code == 200 and 'name="reason"' in page.content.decode()
    assert Payout.objects.get(pk=payout.pk).status == "FROZEN"
    empty = act(client, QUEUE, "reject_selected", [payout], apply="1", reason="   ")
    assert "required" in empty.content.decode()
    assert Payout.objects.get(pk=payout.pk).status == "FROZEN"
    act(client, QUEUE, "reject_selected", [payout], apply="1", reason="payee name mismatch")
    payout.refresh_from_db()
    assert (payout.status, payout.fail_reason, payout.reviewed_by) == ("REJECTED", "payee name mismatch", reviewer)
    assert balances(funded)["frozen"] == 0


def test_reviewer_who_administers_the_merchant_is_refused_in_the_queue(client, funded, reviewer):
    funded.merchant.administrators.add(reviewer)
    payout = payout_in(funded, "FROZEN")
    admin_login(client, reviewer)
    before = money_snapshot(funded)
    response = act(client, QUEUE, "approve_selected", [payout])
    assert "administers" in response.content.decode()
    act(client, QUEUE, "reject_selected", [payout], apply="1", reason="mine")
    assert (Payout.objects.get(pk=payout.pk).status, money_snapshot(funded)) == ("FROZEN", before)


def test_staff_without_review_permission_cannot_see_the_queue_or_decide(client, funded):
    clerk = staff_user("clerk", "Payout operations")
    payout = payout_in(funded, "FROZEN")
    admin_login(client, clerk)
    assert client.get(QUEUE).status_code == 403
    assert act(client, QUEUE, "approve_selected", [payout]).status_code == 403
    assert "Payout review queue" not in client.get("/admin/").content.decode()
    assert Payout.objects.get(pk=payout.pk).status == "FROZEN"


def test_payout_page_is_read_only_masked_and_shows_the_decision_trail(client, funded, reviewer):
    payout = payout_in(funded, "FROZEN", payee_account=ACCOUNT)
    admin_login(client, reviewer)
    act(client, QUEUE, "reject_selected", [payout], apply="1", reason="velocity abuse")
    html = client.get(f"{PAYOUTS}{payout.pk}/change/").content.decode()
    assert ACCOUNT not in html and "\u2022\u2022\u2022\u20229876" in html
    assert "payout.reject" in html and "velocity abuse" in html and "rita" in html
    assert 'name="amount"' not in html and 'type="submit" value="Save' not in html
    assert client.get(f"{PAYOUTS}add/").status_code == 403
    assert client.get(f"{PAYOUTS}{payout.pk}/delete/").status_code == 403


def test_ops_reverse_action_asks_for_amounts_then_reverses(client, funded, ops_user, adapter_calls):
    payout = payout_in(funded, "SUCCESS", amount=20_000)
    available = balances(funded)["available"]
    admin_login(client, ops_user)
    page = act(client, PAYOUTS, "reverse_selected", [payout])
    assert 'name="reversal_amount"' in page.content.decode()
    act(client, PAYOUTS, "reverse_selected", [payout], apply="1", reversal_amount="20000", fee_refund=str(PHP_FEE),
        reason="bank return ticket 42")
    payout.refresh_from_db()
    assert (payout.reversal_amount, payout.fee_refund) == (20_000, PHP_FEE)
    assert balances(funded)["available"] == available + 20_000 + PHP_FEE
    assert AuditLog.objects.get(action="payout.reverse").actor == ops_user


@pytest.mark.parametrize("amount, fee_refund", [("0", "0"), ("20001", "0"), ("100", str(PHP_FEE + 1))])
def test_reverse_action_outside_bounds_is_refused(client, funded, ops_user, adapter_calls, amount, fee_refund):
    payout = payout_in(funded, "SUCCESS", amount=20_000)
    before = money_snapshot(funded)
    admin_login(client, ops_user)
    act(client, PAYOUTS, "reverse_selected", [payout], apply="1", reversal_amount=amount, fee_refund=fee_refund,
        reason="r")
    assert (Payout.objects.get(pk=payout.pk).reversed_at, money_snapshot(funded)) == (None, before)


def test_reverse_action_on_failed_payout_is_refused(client, funded, ops_user, adapter_calls):
    payout = payout_in(funded, "FAILED")
    admin_login(client, ops_user)
    response = act(client, PAYOUTS, "reverse_selected", [payout], apply="1", reversal_amount="100", fee_refund="0",
                   reason="r")
    assert "only a SUCCESS payout" in response.content.decode()


def test_reviewer_without_reverse_permission_cannot_reverse(client, funded, reviewer, adapter_calls):
    payout = payout_in(funded, "SUCCESS")
    admin_login(client, reviewer)
    assert "reverse_selected" not in client.get(PAYOUTS).content.decode()
    act(client, PAYOUTS, "reverse_selected", [payout], apply="1", reversal_amount="100", fee_refund="0", reason="r")
    assert Payout.objects.get(pk=payout.pk).reversed_at is None


def test_deny_list_shows_accounts_masked(client, reviewer):
    DenyListedAccount.objects.create(payee_account=ACCOUNT, reason="fraud")
    admin_login(client, reviewer)
    html = client.get("/admin/payout/denylistedaccount/").content.decode()
    assert "\u2022\u2022\u2022\u20229876" in html and ACCOUNT not in html


def test_queue_detail_page_shows_risk_reasons_read_only(client, funded, reviewer):
    payout = payout_in(funded, "FROZEN", payee_account=ACCOUNT)
    admin_login(client, reviewer)
    response = client.get(f"{QUEUE}{payout.pk}/change/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "review threshold" in html and "payout.create" in html
    assert ACCOUNT not in html and "<textarea" not in html and 'type="submit" value="Save' not in html
