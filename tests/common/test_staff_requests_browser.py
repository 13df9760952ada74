"""Four eyes on staff changes in a real browser: one operator asks for a balance adjustment, the same person cannot
approve it, a second operator approves it and the money moves then. Screenshots kept."""

import pytest
from django.contrib.auth import get_user_model

from apps.common.models import StaffRequest
from tests.helpers import screenshot
from tests.payout.conftest import balances, staff_user
from tests.support.browser import chromium
from tests.support.staff import add_authenticator, browser_sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REQUESTS = "/admin/common/staffrequest/"


def log_in(browser, live_server, username: str, next_path: str):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(15_000)
    add_authenticator(get_user_model().objects.get(username=username))
    browser_sign_in(page, live_server.url, username, next_path=next_path)
    return page


def approve_all(page, reason: str) -> None:
    page.check("#action-toggle")
    page.select_option("select[name=action]", "approve_selected")
    page.click("button[name=index]")
    page.fill("textarea[name=reason]", reason)
    page.click("input[type=submit][value=Approve]")
    page.wait_for_selector("ul.messagelist")


def assert_requests_table_fits(page) -> None:
    clipped = page.evaluate("() => { const r = document.querySelector('#changelist .results');"
                            " return r.scrollWidth - r.clientWidth; }")
    assert clipped <= 0, f"the requests table is cut off by {clipped}px at 1280px"


def test_a_balance_adjustment_needs_a_second_operator(live_server, merchant):
    staff_user("otto", "Payout operations")
    staff_user("olga", "Payout operations")
    available = balances(merchant)["available"]
    with chromium() as browser:
        page = log_in(browser, live_server, "otto", f"{REQUESTS}add/")
        page.fill("#id_merchant_no", merchant.merchant_no)
        page.fill("#id_currency", "php")
        page.fill("#id_amount", "12345")
        page.fill("#id_reason", "goodwill credit, ticket 881")
        screenshot(page, "staff-request-adjustment-form")
        page.click("input[type=submit]")
        page.wait_for_selector("ul.messagelist")
        assert "second person" in page.inner_text("ul.messagelist")
        assert "Credit \u20b1123.45 to" in page.content()
        screenshot(page, "staff-requests-pending")
        approve_all(page, "approving my own")
        assert "a second person must decide it" in page.inner_text("ul.messagelist")
        assert balances(merchant)["available"] == available

        page = log_in(browser, live_server, "olga", REQUESTS)
        approve_all(page, "ticket 881 checked")
        assert "approved" in page.inner_text("ul.messagelist").lower()
        screenshot(page, "staff-requests-approved")
        assert_requests_table_fits(page)
    request = StaffRequest.objects.get()
    assert (request.status, request.requested_by.username, request.decided_by.username) == ("APPROVED", "otto",
                                                                                           "olga")
    assert balances(merchant)["available"] == available + 12345
