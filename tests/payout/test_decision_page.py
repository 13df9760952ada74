"""The reviewer's decision page and the payout pages as a newcomer reads them: a reversed payout is
never a plain "Success", a reviewer who decided is not offered Approve and Reject again, the next payout in the queue
is one click away, and a payout approved from the CLI names its operator."""

import pytest
from django.core.management import call_command

from apps.payout.models import Payout
from apps.payout.services import payout_approve, payout_reverse
from tests.payout.conftest import PHP_THRESHOLD, new_payout, payout_in, staff_user
from tests.support.staff import admin_login

pytestmark = pytest.mark.django_db


def decide_url(payout) -> str:
    return f"/admin/payout/payoutreviewqueue/{payout.pk}/decide/"


def test_a_reversed_payout_is_listed_as_reversed_not_as_plain_success(client, funded, adapter_calls):
    frozen = new_payout(funded, amount=PHP_THRESHOLD, payee_account="0012349876")
    paid = payout_in(funded, "SUCCESS", payee_account="0012349876", amount=20_000)
    payout_reverse(payout_id=paid.pk, reversal_amount=20_000, fee_refund=0, reason="bank return")
    admin_login(client, staff_user("rita", "Risk reviewer"))
    html = client.get(decide_url(frozen)).content.decode()
    history = html.split("previous payouts")[1].split("</table>")[0]
    assert "Success, reversed" in history

    admin_login(client, staff_user("otto", "Payout operations"))
    listed = client.get("/admin/payout/payout/").content.decode()
    assert "Success, reversed" in listed
    page = client.get(f"/admin/payout/payout/{paid.pk}/change/").content.decode()
    assert "Success, reversed" in page


def test_a_partial_reversal_says_so(client, funded, adapter_calls):
    paid = payout_in(funded, "SUCCESS", amount=20_000)
    payout_reverse(payout_id=paid.pk, reversal_amount=5_000, fee_refund=0, reason="part returned")
    admin_login(client, staff_user("otto", "Payout operations"))
    assert "Success, partly reversed" in client.get("/admin/payout/payout/").content.decode()


def test_a_reviewer_who_decided_is_not_offered_approve_and_reject_again(client, funded):
    from apps.merchants.models import MerchantCurrency

    MerchantCurrency.objects.filter(merchant=funded.merchant, currency_id="PHP").update(
        payout_dual_approval_threshold=PHP_THRESHOLD)
    payout = new_payout(funded, amount=PHP_THRESHOLD)  # needs two approvals
    rita = staff_user("rita", "Risk reviewer")
    admin_login(client, rita)
    before = client.get(decide_url(payout)).content.decode()
    assert 'id="approve-button"' in before and 'id="reject-button"' in before
    payout_approve(payout_id=payout.pk, reviewer=rita, reason="invoice matches")
    after = client.get(decide_url(payout)).content.decode()
    assert 'id="approve-button"' not in after and 'id="reject-button"' not in after
    assert "You decided this payout (approve" in after and "waits for a second reviewer" in after

    admin_login(client, staff_user("rolf", "Risk reviewer"))  # the second pair of eyes still may
    assert 'id="approve-button"' in client.get(decide_url(payout)).content.decode()


def test_the_decision_page_links_the_next_payout_in_the_queue(client, funded):
    first, second, third = (new_payout(funded, amount=PHP_THRESHOLD + i) for i in range(3))
    rita = staff_user("rita", "Risk reviewer")
    admin_login(client, rita)
    assert f'href="{decide_url(second)}"' in client.get(decide_url(first)).content.decode()
    assert f'href="{decide_url(first)}"' in client.get(decide_url(third)).content.decode()  # wraps to the oldest
    # After deciding the first, its page leads on to the next one still waiting.
    client.post(decide_url(first), {"decision": "reject", "reason": "payee name mismatch"})
    html = client.get(decide_url(first)).content.decode()
    assert f'href="{decide_url(second)}"' in html and "Next payout in the queue" in html
    for payout in (second, third):
        payout_approve(payout_id=payout.pk, reviewer=None, reason="", via="cli:ops")
    assert "No other payout is waiting for you" in client.get(decide_url(first)).content.decode()


def test_a_payout_approved_from_the_cli_names_its_operator(client, funded, adapter_calls):
    payout = new_payout(funded, amount=PHP_THRESHOLD)
    call_command("review_payout", payout.platform_order_no, "--approve", "--operator", "rosa",
                 stdout=open("/dev/null", "w"))
    assert Payout.objects.get(pk=payout.pk).reviewed_by_id is None
    admin_login(client, staff_user("otto", "Payout operations"))
    page = client.get(f"/admin/payout/payout/{payout.pk}/change/").content.decode()
    reviewed_by = page.split("field-reviewed_by_text")[1].split("field-reviewed_utc")[0]
    assert "cli:rosa" in reviewed_by, reviewed_by
    admin_login(client, staff_user("rita", "Risk reviewer"))
    assert "cli:rosa" in client.get(decide_url(payout)).content.decode().split('id="decide-reviewed-by"')[1][:40]


def two_approval_payout(funded) -> Payout:
    from apps.merchants.models import MerchantCurrency

    MerchantCurrency.objects.filter(merchant=funded.merchant, currency_id="PHP").update(
        payout_dual_approval_threshold=PHP_THRESHOLD)
    payout = new_payout(funded, amount=PHP_THRESHOLD)
    assert payout.approvals_required == 2
    return payout


def notice(html: str) -> str:
    return html.split('id="decide-decided"')[1].split("</div>")[0]


def test_a_payout_approved_by_two_reviewers_names_both_and_when_in_a_notice_above_the_page(client, funded):
    payout = two_approval_payout(funded)
    rita, rolf = staff_user("rita", "Risk reviewer"), staff_user("rolf", "Risk reviewer")
    payout_approve(payout_id=payout.pk, reviewer=rita, reason="invoice matches")
    payout_approve(payout_id=payout.pk, reviewer=rolf, reason="called the payee")
    first, second = Payout.objects.get(pk=payout.pk).approvals.order_by("created_at", "id")
    admin_login(client, staff_user("rosa", "Risk reviewer"))
    html = client.get(decide_url(payout)).content.decode()
    said = notice(html)
    assert "Approved" in said and "rita" in said and "rolf" in said
    assert f"{first.created_at:%Y-%m-%d %H:%M:%S} UTC" in said and f"{second.created_at:%Y-%m-%d %H:%M:%S} UTC" in said
    assert html.index('id="decide-decided"') < html.index("decide-grid")  # above the facts
    reviewed_by = html.split('id="decide-reviewed-by">')[1].split("<")[0]
    assert reviewed_by == "rita and rolf"
    assert 'id="approve-button"' not in html


def test_the_second_approver_is_told_theirs_is_the_second_approval_not_one_of_two(client, funded):
    payout = two_approval_payout(funded)
    rita = staff_user("rita", "Risk reviewer")
    admin_login(client, staff_user("rolf", "Risk reviewer"))
    first_look = client.get(decide_url(payout)).content.decode()
    assert "yours counts as one" in first_look and 'id="decide-decided"' not in first_look
    payout_approve(payout_id=payout.pk, reviewer=rita, reason="invoice matches")
    html = client.get(decide_url(payout)).content.decode()
    confirm = html.split('id="approve-button"')[1].split('data-confirm="')[1].split('"')[0]
    assert "yours counts as one" not in confirm
    assert "second of two approvals" in confirm and "rita approved" in confirm
    assert "Approved by <strong>rita</strong>" in notice(html) and "waits for a second reviewer" in notice(html)


def test_a_rejected_payout_names_who_rejected_it_and_when_in_the_notice(client, funded):
    from apps.payout.services import payout_reject

    payout = new_payout(funded, amount=PHP_THRESHOLD)
    rita = staff_user("rita", "Risk reviewer")
    payout_reject(payout_id=payout.pk, reviewer=rita, reason="payee name mismatch")
    admin_login(client, staff_user("rolf", "Risk reviewer"))
    said = notice(client.get(decide_url(payout)).content.decode())
    assert "Rejected" in said and "rita" in said and "UTC" in said


def test_the_review_queue_says_what_it_lists_in_its_title_and_count(client, funded):
    new_payout(funded, amount=PHP_THRESHOLD)
    admin_login(client, staff_user("rita", "Risk reviewer"))
    html = client.get("/admin/payout/payoutreviewqueue/").content.decode()
    assert "Select payout in review" not in html and "Payout review queue</p>" not in html
    assert "<title>Payouts waiting for a decision" in html and "<h1>Payouts waiting for a decision</h1>" in html
    count = html.split('id="queue-count">')[1].split("</p>")[0]
    assert "1 payout waiting for a decision" in count
