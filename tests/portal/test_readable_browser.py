"""What a merchant reads in the portal, in a real browser at 1280 and 390 px: order numbers whole on one line in the
payouts list, a reversed payout under Success on the home page, Manila times said once in the footer, the Team
page's invite starting at Viewer. Screenshots `portal-readable-*` (tests/helpers.py: screenshot)."""

import pytest

from apps.payout import services as payout_services
from apps.payout.models import Payout
from tests.portal.support import browser_sign_in, portal_user
from tests.portal.test_browser import PHONE, WIDE, both_widths, browser, module_browser, page  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The number of text lines each order number takes in the payouts list (one per distinct line box top).
ORDER_NUMBER_LINES = """() => Array.from(document.querySelectorAll('#order-list tr[data-order] td:nth-child(2) > *'))
  .map(element => { const range = document.createRange(); range.selectNodeContents(element);
                    return new Set(Array.from(range.getClientRects()).map(rect => Math.round(rect.top))).size; })"""


def test_payouts_list_keeps_each_order_number_on_one_line_and_home_counts_reversed_under_success(
        page, live_server, shops):
    a, _ = shops
    # A long order number of the merchant's, as systems make them, and a long payee name beside it.
    Payout.objects.filter(pk=a.payout.pk).update(mch_order_no="ACME-SETTLEMENT-2026-11-000123-PAYROLL-B",
                                                 payee_name="Maria Clara de los Santos-Ibarra y Alonso")
    payout_services.payout_channel_result(platform_order_no=a.payout.platform_order_no, outcome="paid")
    payout_services.payout_channel_returned(platform_order_no=a.payout.platform_order_no)
    user = portal_user(a.merchant, "finance")
    browser_sign_in(page, live_server.url, user.username)

    rows = page.locator("#today-payouts tr").all_inner_texts()
    assert [row.split("\t")[0] for row in rows] == ["Success", "of which reversed"], rows
    assert "Manila time (UTC+8)" in page.inner_text("#portal-foot")
    both_widths(page, "readable-home")

    page.goto(f"{live_server.url}/portal/payouts/")
    page.wait_for_selector(f'tr[data-order="{a.payout.platform_order_no}"]')
    assert page.evaluate(ORDER_NUMBER_LINES) == [1, 1]
    both_widths(page, "readable-payouts")

    page.click(f'tr[data-order="{a.payout.platform_order_no}"] a')
    page.wait_for_selector("#history")
    assert "₱123.45 returned by the bank" in page.inner_text("#history")
    both_widths(page, "readable-payout")


def test_team_page_invites_a_viewer_unless_the_owner_chooses_more(page, live_server, merchant):
    owner = portal_user(merchant, "owner")
    browser_sign_in(page, live_server.url, owner.username, next_path="/portal/team/")
    assert page.eval_on_selector("#invite-form select[name=role]", "select => select.value") == "viewer"
    both_widths(page, "readable-team")
