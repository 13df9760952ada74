"""The review queue and the payout pages in the admin (Django test client; the browser test drives the same)."""

import pytest
from django.contrib.admin import helpers

from apps.common.models import AuditLog, StaffRequest
from apps.payout.models import DenyListedAccount, Payout
from tests.payout.conftest import PHP_FEE, balances, money_snapshot, payout_in, staff_user
from tests.support.four_eyes import approval_form
from tests.support.staff import admin_login

pytestmark = pytest.mark.django_db

QUEUE = "/admin/payout/payoutreviewqueue/"
PAYOUTS = "/admin/payout/payout/"
REQUESTS = "/admin/common/staffrequest/"
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
    assert "risk-tag'>amount<" in html and "\u20b150,000.00 PHP" in html and funded.merchant_no in html
    assert ">0/1<" in html  # approvals so far


def test_reviewer_approves_from_the_queue(client, funded, reviewer, django_capture_on_commit_callbacks):
    payout = payout_in(funded, "FROZEN")
    admin_login(client, reviewer)
    page = act(client, QUEUE, "approve_selected", [payout])  # asks for confirmation and a reason first
    assert page.status_code == 200 and 'name="reason"' in page.content.decode()
    assert "\u20b150,000.00 PHP" in page.content.decode() and "5000000 PHP" not in page.content.decode()
    assert Payout.objects.get(pk=payout.pk).status == "FROZEN"
    with django_capture_on_commit_callbacks() as dispatched:
        response = act(client, QUEUE, "approve_selected", [payout], apply="1", reason="known payee, ticket 7")
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
    response = act(client, QUEUE, "approve_selected", [payout], apply="1", reason="mine")
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


def test_ops_reverse_action_asks_for_amounts_then_a_second_operator_approves(client, funded, ops_user,
                                                                              adapter_calls):
    payout = payout_in(funded, "SUCCESS", amount=20_000)
    available = balances(funded)["available"]
    admin_login(client, ops_user)
    page = act(client, PAYOUTS, "reverse_selected", [payout])
    assert 'name="reversal_amount"' in page.content.decode()
    asked = act(client, PAYOUTS, "reverse_selected", [payout], apply="1", reversal_amount="20000",
                fee_refund=str(PHP_FEE), reason="bank return ticket 42")
    assert "Reversal requested" in asked.content.decode()
    assert Payout.objects.get(pk=payout.pk).reversed_at is None  # a request only: nothing moved yet
    assert balances(funded)["available"] == available
    request = StaffRequest.objects.get()
    # The requester may not approve it (four eyes).
    act(client, REQUESTS, "approve_selected", [request], apply="1", reason="looks right")
    assert StaffRequest.objects.get().status == "PENDING" and balances(funded)["available"] == available
    second = staff_user("olga", "Payout operations")
    admin_login(client, second)
    # Through the approval page, which sends back the change it showed (docs/back-office.md).
    client.post(REQUESTS, approval_form(client, [request.pk], reason="checked the bank return"))
    payout.refresh_from_db()
    assert (payout.reversal_amount, payout.fee_refund) == (20_000, PHP_FEE)
    assert balances(funded)["available"] == available + 20_000 + PHP_FEE
    assert AuditLog.objects.get(action="payout.reverse").actor == second
    assert StaffRequest.objects.get().status == "APPROVED"


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
    assert "only an unreversed SUCCESS payout" in response.content.decode()
    assert not StaffRequest.objects.exists()


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
    response = client.get(f"{QUEUE}{payout.pk}/change/", follow=True)  # the queue opens the decision page
    html = response.content.decode()
    assert response.status_code == 200 and response.redirect_chain[-1][0].endswith("/decide/")
    assert "review threshold" in html and "payout.create" in html
    assert ACCOUNT not in html and 'type="submit" value="Save' not in html and 'name="reason"' in html


def test_no_link_on_a_payout_page_answers_403_to_a_reviewer_and_times_say_utc(client, funded, reviewer):
    import re

    payout = payout_in(funded, "FROZEN")
    admin_login(client, reviewer)
    act(client, QUEUE, "reject_selected", [payout], apply="1", reason="mismatch")
    for url in (f"{PAYOUTS}{payout.pk}/change/", f"{QUEUE}{payout.pk}/decide/"):
        html = client.get(url).content.decode()
        content = html[html.index('id="content"'):]
        links = set(re.findall(r'href="(/admin/[^"#?]+)"', content))
        for link in links:
            assert client.get(link).status_code != 403, (url, link)
        assert "UTC" in content and "Payments back office" in html and "Django administration" not in html


def test_the_decision_page_shows_the_payee_accounts_history_across_merchants_masked(client, funded, other_merchant,
                                                                                   reviewer, adapter_calls):
    from tests.payout.conftest import fund

    fund(other_merchant, 10_000_000)
    elsewhere = payout_in(other_merchant, "SUCCESS", payee_account=ACCOUNT, amount=12_345)
    other_payee = payout_in(funded, "APPROVED", payee_account="0099991111", amount=2_500)
    payout = payout_in(funded, "FROZEN", payee_account=ACCOUNT)
    admin_login(client, reviewer)
    html = client.get(f"{QUEUE}{payout.pk}/decide/").content.decode()
    payee_section = html[html.index("previous payouts"):html.index("recent payouts")]
    assert other_merchant.merchant_no in payee_section and "\u20b1123.45 PHP" in payee_section
    assert "Succeeded" in payee_section or "SUCCESS" in payee_section.upper()
    assert "\u20b125.00 PHP" not in payee_section  # another payee's payout is not this account's history
    merchant_section = html[html.index("recent payouts"):]
    assert "\u20b125.00 PHP" in merchant_section and "\u2022\u2022\u2022\u20221111" in merchant_section
    assert other_merchant.merchant_no not in merchant_section[:merchant_section.index("Audit trail")]
    assert ACCOUNT not in html and "0099991111" not in html and elsewhere.payee_account not in html
    assert other_payee.platform_order_no  # listed by amount and masked payee, never by the full account


def test_a_decision_without_a_reason_or_by_someone_who_may_not_decide_moves_nothing(client, funded, reviewer):
    payout = payout_in(funded, "FROZEN")
    url = f"{QUEUE}{payout.pk}/decide/"
    before = money_snapshot(funded)
    admin_login(client, reviewer)
    for decision in ("approve", "reject"):
        response = client.post(url, {"decision": decision, "reason": "   "})
        assert response.status_code == 200 and "reason is required" in response.content.decode()
    funded.merchant.administrators.add(reviewer)
    response = client.post(url, {"decision": "approve", "reason": "looks fine"}, follow=True)
    assert "administers merchant" in response.content.decode()
    payout.refresh_from_db()
    assert payout.status == "FROZEN" and not payout.approvals.exists() and money_snapshot(funded) == before
    ops = staff_user("otto", "Payout operations")
    admin_login(client, ops)
    assert client.post(url, {"decision": "approve", "reason": "ops says yes"}).status_code == 403
    payout.refresh_from_db()
    assert payout.status == "FROZEN" and not payout.approvals.exists()
