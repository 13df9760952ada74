"""Four eyes on staff changes in a real browser: one operator asks for a balance adjustment, the same person cannot
approve it, a second operator approves it and the money moves then. Screenshots kept."""

import pytest
from django.contrib.auth import get_user_model

from apps.common.models import StaffRequest
from tests.common.test_money_settings_four_eyes import xendit  # noqa: F401 - a fixture
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


def test_the_approver_reads_a_long_channel_change_whole_at_1280px(live_server, bootstrapped, settings, xendit):
    """The channel change of the staff request pages' own test (tests/common/test_staff_request_changes.py) in a
    real browser: the list names every field, credentials first; the request page and the approval page show every
    value whole, the secrets as replaced; nothing is cut or scrolls sideways."""
    from django.test import Client

    from apps.channels.models import Channel
    from tests.common.test_staff_request_changes import LONG_NAME, NEW_CODES, ask_for_the_long_change
    from tests.support.four_eyes import staff_account
    from tests.support.staff import admin_login

    settings.PLATFORM_ENVIRONMENT, settings.CHANNEL_API_BASE_URL_OVERRIDE = "live", True
    channel = Channel.objects.create(code="XENDIT_PHP_PAYOUT", name="Xendit PHP payouts", adapter="xendit",
                                     direction="payout", currency_id="PHP",
                                     bank_codes=[code for code in NEW_CODES if code != "MULE_BANK"] + ["GCASH"])
    from apps.channels.services import channel_credentials_set
    from tests.common.test_money_settings_four_eyes import REAL_SECRET, REAL_TOKEN
    channel_credentials_set(channel=channel, secret_key=REAL_SECRET, callback_token=REAL_TOKEN)
    request = ask_for_the_long_change(admin_login(Client(), staff_account("root")), Channel.objects.get(pk=channel.pk),
                                      xendit.url)
    staff_account("olga")
    with chromium() as browser:
        page = log_in(browser, live_server, "olga", REQUESTS)
        assert "secret key replaced, callback token replaced" in page.inner_text("#result_list")
        assert_requests_table_fits(page)
        screenshot(page, "staff-request-channel-list")

        page.goto(f"{live_server.url}{REQUESTS}{request.pk}/change/")
        table = page.inner_text(f"#changes-{request.pk}")
        assert LONG_NAME in table and "MULE_BANK" in table and xendit.url in table and "replaced" in table
        assert REAL_SECRET not in page.content()
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 1280
        screenshot(page, "staff-request-channel-page")

        page.goto(f"{live_server.url}{REQUESTS}")
        page.check("#action-toggle")
        page.select_option("select[name=action]", "approve_selected")
        page.click("button[name=index]")
        assert LONG_NAME in page.inner_text(f"#changes-{request.pk}")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 1280
        screenshot(page, "staff-request-channel-approval")
        page.fill("textarea[name=reason]", "checked with the upstream")
        page.click("input[type=submit][value=Approve]")
        page.wait_for_selector("ul.messagelist")
        assert "approved" in page.inner_text("ul.messagelist").lower()
    assert Channel.objects.get(pk=channel.pk).name == LONG_NAME
