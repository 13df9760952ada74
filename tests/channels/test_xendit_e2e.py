"""End to end in a live deployment with Xendit (the emulator): a real browser forwarded to the invoice page, a real
Celery worker submitting the payout, webhooks over HTTP, and the merchant's signed callbacks, the same as with the
sandbox (tests/payout/test_sandbox_e2e.py, tests/collection/test_pay_page_browser.py). And the sandbox deployment's
SANDBOX banner, looked at in a phone-sized browser."""

import os

import pytest
from django.test import Client

from apps.channels.models import UpstreamPayin
from apps.collection.models import CollectionOrder
from apps.payout.models import Payout
from tests.callbacks.merchant_side import merchant_verifies
from tests.channels.conftest import PAYIN_CODE, PAYOUT_CODE
from tests.collection.conftest import balances as collection_balances
from tests.collection.conftest import create_ok as pay_create_ok
from tests.conftest import make_merchant
from tests.helpers import screenshot
from tests.payout.conftest import PHP_FEE, balances, create, fund, query
from tests.support.browser import CHROMIUM, chromium, contexts_closed
from tests.support.wait import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
browser_only = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian chromium (make browsers)")

PHONE_WIDTH = 390
FUNDS = 10_000_000


@pytest.fixture(scope="module")
def module_browser():
    """One Chromium for this module's tests (one xdist worker runs them all: tests/conftest.py); each test gets it
    with its contexts closed afterwards (tests/support/browser.py: contexts_closed)."""
    with chromium() as browser:
        yield browser


@pytest.fixture
def phone(module_browser):
    with contexts_closed(module_browser) as browser:
        context = browser.new_context(viewport={"width": PHONE_WIDTH, "height": 844}, device_scale_factor=2,
                                      is_mobile=True, has_touch=True)
        page = context.new_page()
        yield page
        context.close()


def webhook(live_server, code: str) -> str:
    return f"{live_server.url}/channels/xendit/{code}/webhook"


@pytest.mark.browser
@browser_only
def test_sandbox_deployment_pay_page_shows_the_sandbox_banner(merchant, live_server, phone):
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=123456, subject="Two coffees")
    phone.goto(f"{live_server.url}/pay/{order.pay_token}")
    banner = phone.get_by_test_id("sandbox-banner")
    assert banner.is_visible()
    assert banner.inner_text().startswith("SANDBOX") and "no real money" in banner.inner_text()
    assert banner.bounding_box()["y"] < 60  # the first thing on the page
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE_WIDTH
    screenshot(phone, "pay-page-sandbox-banner")


@pytest.mark.browser
@browser_only
def test_live_payin_forwards_the_browser_to_xendit_and_the_paid_webhook_reaches_the_merchant(
        xendit_channels, merchant, xendit_emulator, live_server, phone, callback_receiver, live_celery_worker):
    merchant.merchant.collection_callback_url = callback_receiver.url
    merchant.merchant.save(update_fields=["collection_callback_url"])
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=123456, attach="cart=42")
    # pay/create opened the invoice (after commit, in the worker), before the payer came
    opened = wait_until(lambda: UpstreamPayin.objects.filter(platform_order_no=order.platform_order_no).first(),
                        what="the invoice opened after pay/create")
    response = phone.goto(f"{live_server.url}/pay/{order.pay_token}")
    [invoice] = xendit_emulator.invoice_by_external_id(order.platform_order_no)
    assert invoice["id"] == opened.reference
    assert phone.url == invoice["invoice_url"] and response.status == 200
    assert phone.locator("h1").inner_text() == "Xendit checkout (emulator)"
    assert phone.locator("#amount").inner_text() == "1234.56"
    screenshot(phone, "pay-page-live-forwarded-to-xendit")

    xendit_emulator.pay_invoice(invoice["id"])
    assert xendit_emulator.invoice_webhook(invoice["id"], webhook(live_server, PAYIN_CODE)).status_code == 200
    order.refresh_from_db()
    assert order.status == CollectionOrder.Status.SUCCESS
    [received] = callback_receiver.wait_for(1, timeout=20)
    body = received.body
    assert {k: body[k] for k in ("platform_order_no", "amount", "currency", "status", "attach", "paid_at")} == {
        "platform_order_no": order.platform_order_no, "amount": 123456, "currency": "PHP", "status": "SUCCESS",
        "attach": "cart=42", "paid_at": int(order.paid_at.timestamp())}
    assert merchant_verifies(body)
    assert collection_balances(merchant)["available"] == 123456 - order.fee


@pytest.mark.browser
@browser_only
def test_live_pay_page_while_xendit_is_down_says_so_and_offers_no_sandbox_button(xendit_channels, merchant,
                                                                                xendit_emulator, live_server, phone):
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=123456, subject="Two coffees")
    xendit_emulator.fail_next("invoices", "5xx")
    response = phone.goto(f"{live_server.url}/pay/{order.pay_token}")
    assert response.status == 503 and phone.url.startswith(live_server.url)
    assert phone.get_by_test_id("unavailable").is_visible()
    assert phone.get_by_test_id("sandbox-banner").count() == 0 and phone.get_by_role("button").count() == 0
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE_WIDTH
    screenshot(phone, "pay-page-live-xendit-unavailable")
    # the payer tries again a minute later: forwarded to the invoice
    phone.goto(f"{live_server.url}/pay/{order.pay_token}")
    [invoice] = xendit_emulator.invoice_by_external_id(order.platform_order_no)
    assert phone.url == invoice["invoice_url"]
    order.refresh_from_db()
    assert order.status == CollectionOrder.Status.CREATED


def test_live_payout_goes_to_xendit_by_the_worker_and_the_merchant_sees_what_the_sandbox_shows(
        xendit_channels, bootstrapped, rsa_keys, xendit_emulator, live_server, callback_receiver, live_celery_worker):
    shop = make_merchant(rsa_keys[2], name="Live Shop", payout_callback_url=callback_receiver.url)
    fund(shop, FUNDS)
    status, body = create(Client(), shop, amount=25_000, payee_account="09171234567", bank_code="GCASH")
    assert (status, body["data"]["status"]) == (200, "APPROVED")
    number = body["data"]["platform_order_no"]
    # the worker submitted it upstream, with the order number as idempotency key
    payout = wait_until(lambda: (p := Payout.objects.get(platform_order_no=number)).upstream_reference and p,
                        what="the payout submitted to Xendit")
    [upstream] = xendit_emulator.payouts_by_reference(number)
    assert (upstream["id"], xendit_emulator.idempotency_keys[number], upstream["channel_code"]) == (
        payout.upstream_reference, payout.upstream_reference, "PH_GCASH")
    assert balances(shop) == {"available": FUNDS - 25_000 - PHP_FEE, "settling": 0, "frozen": 25_000 + PHP_FEE}

    xendit_emulator.settle_payout(upstream["id"], "SUCCEEDED")
    assert xendit_emulator.payout_webhook("payout.succeeded", upstream["id"],
                                          webhook(live_server, PAYOUT_CODE)).status_code == 200
    [success] = [r.body for r in callback_receiver.wait_for(1)]
    assert merchant_verifies(success)
    assert (success["status"], success["amount"], success["fee"]) == ("SUCCESS", 25_000, PHP_FEE)
    assert "event" not in success and "finished_at" not in success
    assert balances(shop) == {"available": FUNDS - 25_000 - PHP_FEE, "settling": 0, "frozen": 0}
    assert query(Client(), shop, platform_order_no=number)[1]["data"]["status"] == "SUCCESS"

    xendit_emulator.settle_payout(upstream["id"], "REVERSED")
    assert xendit_emulator.payout_webhook("payout.reversed", upstream["id"],
                                          webhook(live_server, PAYOUT_CODE)).status_code == 200
    reversed_ = callback_receiver.wait_for(2)[1].body
    assert reversed_["event"] == "payout.reversed" and "status" not in reversed_
    assert (reversed_["reversal_amount"], reversed_["fee_refund"], reversed_["amount"]) == (25_000, PHP_FEE, 25_000)
    assert merchant_verifies(reversed_)
    assert balances(shop) == {"available": FUNDS, "settling": 0, "frozen": 0}
