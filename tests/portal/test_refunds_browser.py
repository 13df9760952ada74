"""Refunds in a real browser (Debian chromium through Playwright, against live_server): finance asks for a refund on a
pay-in's page, an owner finds it under "Waiting for you" and approves it with a code; the pay-in's page then lists
both refunds. Screenshots at 1280 and 390 px (var/screenshots/portal-refund-*)."""

import pytest

from apps.collection.models import Refund
from apps.collection.refunds import refund_create
from apps.collection.services import collection_create, collection_notify_paid
from apps.portal.models import RefundRequest
from tests.portal.support import browser_sign_in
from tests.portal.team import member, step_up_code
from tests.portal.test_portaldev_browser import shots
from tests.support.browser import chromium

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_refund_asked_for_and_approved_in_a_browser(live_server, bootstrapped, rsa_keys):
    from tests.conftest import make_merchant

    ctx = make_merchant(rsa_keys[0], name="Sari-Sari Online")
    owner, finance = member(ctx.merchant, "owner"), member(ctx.merchant, "finance")
    order = collection_create(merchant=ctx.merchant, mch_order_no="SHOP-2041", product_code="PHP_COLLECT_D0",
                              amount=100_000, currency="PHP", subject="Rice cooker")
    collection_notify_paid(platform_order_no=order.platform_order_no)
    refund_create(merchant=ctx.merchant, platform_order_no=order.platform_order_no, mch_refund_no="RF-API-300",
                  amount=30_000, reason="one item missing")
    base = live_server.url
    with chromium() as browser:
        fpage = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        fpage.set_default_timeout(20_000)
        browser_sign_in(fpage, base, finance.user.username)
        fpage.goto(f"{base}/portal/payins/{order.platform_order_no}/")
        assert "still refundable ₱700.00" in fpage.inner_text("#refundable")
        fpage.locator("#refunds").scroll_into_view_if_needed()
        shots(fpage, "portal-refund-ask")
        fpage.fill("#id_refund_amount", "1,000.00")
        fpage.fill("#id_refund_reason", "order cancelled by the buyer")
        fpage.click("#refund-form button[type=submit]")
        fpage.wait_for_selector("text=more than is still refundable")
        assert RefundRequest.objects.count() == 0
        fpage.fill("#id_refund_amount", "700.00")
        fpage.fill("#id_refund_reason", "order cancelled by the buyer")
        fpage.click("#refund-form button[type=submit]")
        fpage.wait_for_selector("#request-status")
        assert "Waiting for an owner" in fpage.inner_text("#request-status")

        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.set_default_timeout(20_000)
        browser_sign_in(page, base, owner.user.username)
        page.click("text=Refunds waiting for your approval")
        page.click("#requests-table a >> text=#")
        page.wait_for_selector("#approve-form")
        shots(page, "portal-refund-approval")
        page.fill("#approve-form #id_code", step_up_code(owner.user))
        page.click("#approve-form button[type=submit]")
        page.wait_for_selector("text=Approved: refund")
        request = RefundRequest.objects.get()
        assert request.status == RefundRequest.Status.DONE
        page.click("#request-facts a")
        page.wait_for_selector("#refund-list")
        assert page.locator("#refund-list tr[data-refund]").count() == 2
        assert "still refundable ₱0.00" in page.inner_text("#refundable")
        shots(page, "portal-refund-payin")
        page.click("#portal-nav >> text=Refunds")
        page.wait_for_selector("#refunds-table")
        assert page.locator("#refunds-table tr[data-refund]").count() == 2
        shots(page, "portal-refund-list")
    assert Refund.objects.count() == 2
