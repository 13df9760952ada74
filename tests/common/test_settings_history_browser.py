"""The settings audit trail in a real browser: a superuser signs in with a code, asks for a review threshold change on
the merchant page, a second superuser approves it (four eyes), and the history page says who asked and who
approved what (1280 px, screenshot kept)."""

import pytest
from django.contrib.auth.models import User

from apps.merchants.models import MerchantCurrency
from tests.common.test_staff_requests_browser import REQUESTS, approve_all
from tests.helpers import screenshot
from tests.support.browser import chromium
from tests.support.staff import PASSWORD, add_authenticator, browser_sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_threshold_changed_in_the_admin_shows_in_its_history(live_server, merchant):
    add_authenticator(User.objects.create_superuser("ada", password=PASSWORD))
    add_authenticator(User.objects.create_superuser("bea", password=PASSWORD))
    threshold = MerchantCurrency.objects.get(merchant=merchant.merchant, currency_id="PHP")
    before = threshold.payout_review_threshold
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(15_000)
        browser_sign_in(page, live_server.url, "ada",
                        next_path=f"/admin/merchants/merchant/{merchant.merchant.pk}/change/")
        row = page.locator("#currencies-group tr", has=page.locator("select, td", has_text="PHP")).first
        row.locator("input[name$=payout_review_threshold]").fill("7654321")
        page.fill("#id_change_reason", "merchant's annual risk review")
        page.click("input[name=_save]")
        page.wait_for_selector("ul.messagelist")
        assert "second person" in page.inner_text("ul.messagelist")

        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(15_000)
        browser_sign_in(page, live_server.url, "bea", next_path=REQUESTS)
        approve_all(page, "checked with the risk team")

        page.goto(f"{live_server.url}/admin/merchants/merchantcurrencyevent/?pgh_obj={threshold.pk}")
        first_row = page.locator("#result_list tbody tr").first
        text = first_row.inner_text()
        assert "bea (approved request #" in text and "of ada)" in text and "changed" in text
        assert f"payout_review_threshold: {before} \u2192 7654321" in text
        assert page.locator("#content-main input[name=_save], .object-tools .addlink").count() == 0  # read-only
        screenshot(page, "settings-history-merchant-currency")
    threshold.refresh_from_db()
    assert threshold.payout_review_threshold == 7654321
