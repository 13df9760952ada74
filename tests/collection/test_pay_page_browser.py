"""The hosted pay page in a real headless browser (Playwright driving Debian's chromium) against live_server."""

import os
from datetime import timedelta

import pytest

from apps.callbacks.models import CallbackEvent
from apps.collection.models import CollectionOrder
from apps.collection.services import collection_expire
from apps.ledger.models import Posting
from tests.collection.conftest import CREATE, balances, order_params
from tests.helpers import post_json, screenshot
from tests.support.browser import CHROMIUM, chromium
from tests.support.wait import wait_until

PHONE_WIDTH = 390  # a common phone's CSS width

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian chromium (make browsers)"),
]


@pytest.fixture(scope="module")
def browser():
    with chromium() as browser:
        yield browser


@pytest.fixture
def phone(browser):
    """A phone-sized page; fails the test on any console error (CSP violations included)."""
    context = browser.new_context(viewport={"width": PHONE_WIDTH, "height": 844}, device_scale_factor=2,
                                  is_mobile=True, has_touch=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.errors = errors
    yield page
    context.close()


def create_order(client, ctx, **params) -> CollectionOrder:
    status, body = post_json(client, CREATE, ctx.signed_body(order_params(**params)))
    assert (status, body["code"]) == (200, "0"), body
    return CollectionOrder.objects.get(platform_order_no=body["data"]["platform_order_no"])


def page_url(live_server, order: CollectionOrder) -> str:
    # pay_url is on PAY_BASE_URL; the browser opens the same path on the live server.
    return live_server.url + order.pay_url.removeprefix(order.pay_url.split("/pay/")[0])


def test_payer_pays_in_browser_and_merchant_receives_signed_callback(client, merchant, live_server, phone,
                                                                     callback_receiver, live_celery_worker):
    from tests.callbacks.merchant_side import merchant_verifies

    merchant.merchant.collection_callback_url = callback_receiver.url
    merchant.merchant.save(update_fields=["collection_callback_url"])
    order = create_order(client, merchant, amount=123456, subject="Two coffees", attach="cart=42",
                         return_url="https://shop.example/thanks")

    response = phone.goto(page_url(live_server, order))
    assert response.status == 200
    assert phone.get_by_test_id("amount").inner_text() == "₱1,234.56"
    assert phone.get_by_test_id("merchant").inner_text() == "Acme"
    assert phone.get_by_test_id("subject").inner_text() == "Two coffees"
    assert "min" in phone.locator("#time-left").inner_text()
    # The card fits the phone's screen, and a narrower 360 px one: no horizontal scrolling.
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE_WIDTH
    screenshot(phone, "pay-page-open")
    phone.set_viewport_size({"width": 360, "height": 740})
    assert phone.evaluate("document.documentElement.scrollWidth") <= 360
    phone.set_viewport_size({"width": PHONE_WIDTH, "height": 844})

    phone.get_by_role("button", name="Pay", exact=True).click()
    phone.wait_for_load_state()
    assert phone.get_by_test_id("status").inner_text() == "Payment received"
    assert phone.get_by_test_id("return").get_attribute("href") == "https://shop.example/thanks"
    screenshot(phone, "pay-page-paid")
    assert phone.errors == []

    order.refresh_from_db()
    assert order.status == CollectionOrder.Status.SUCCESS
    assert balances(merchant)["settling"] == 123456

    received = callback_receiver.wait_for(1, timeout=20)
    body = received[0].body
    assert {k: body[k] for k in ("platform_order_no", "mch_order_no", "amount", "currency", "status", "attach",
                                 "paid_at")} == {
        "platform_order_no": order.platform_order_no, "mch_order_no": order.mch_order_no, "amount": 123456,
        "currency": "PHP", "status": "SUCCESS", "attach": "cart=42", "paid_at": int(order.paid_at.timestamp())}
    assert merchant_verifies(body)
    wait_until(lambda: CallbackEvent.objects.get(platform_order_no=order.platform_order_no).status
               == CallbackEvent.Status.DELIVERED, what="the collection callback recorded as delivered")


def test_fail_button_in_browser_leaves_order_created(client, merchant, live_server, phone):
    order = create_order(client, merchant)
    phone.goto(page_url(live_server, order))
    phone.get_by_role("button", name="Fail", exact=True).click()
    phone.wait_for_load_state()
    assert "try again" in phone.get_by_test_id("failed").inner_text()
    assert phone.get_by_role("button", name="Pay", exact=True).is_visible()
    screenshot(phone, "pay-page-failed")
    order.refresh_from_db()
    assert order.status == CollectionOrder.Status.CREATED
    assert not Posting.objects.exists()
    assert phone.errors == []


def test_expired_order_page_in_browser_refuses_payment(client, merchant, live_server, phone):
    order = create_order(client, merchant, expire_seconds=60)
    phone.goto(page_url(live_server, order))
    assert phone.get_by_role("button", name="Pay", exact=True).is_visible()
    collection_expire(order_id=order.pk, now=order.expire_at + timedelta(seconds=1))

    # A payer who kept the old page open presses Pay: the server refuses.
    phone.get_by_role("button", name="Pay", exact=True).click()
    phone.wait_for_load_state()
    assert "expired" in phone.get_by_test_id("status").inner_text()
    assert phone.get_by_role("button").count() == 0
    screenshot(phone, "pay-page-expired-on-pay")
    phone.goto(page_url(live_server, order))
    assert "expired" in phone.get_by_test_id("status").inner_text()
    screenshot(phone, "pay-page-expired")
    order.refresh_from_db()
    assert order.status == CollectionOrder.Status.EXPIRED
    assert not Posting.objects.exists()


def test_countdown_reaching_zero_disables_payment_in_browser(client, merchant, live_server, phone):
    order = create_order(client, merchant, expire_seconds=60)
    CollectionOrder.objects.filter(pk=order.pk).update(expire_at=order.created_at + timedelta(seconds=2))
    order.refresh_from_db()
    phone.goto(page_url(live_server, order))
    phone.locator("#expired-note").wait_for(state="visible", timeout=6000)
    assert phone.get_by_role("button", name="Pay", exact=True).count() == 0 or \
        not phone.get_by_role("button", name="Pay", exact=True).is_visible()
    screenshot(phone, "pay-page-countdown-at-zero")


def test_unknown_link_in_browser_is_an_html_not_found_page(live_server, phone, db):
    response = phone.goto(live_server.url + "/pay/not-a-real-token")
    assert response.status == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "not found" in phone.get_by_test_id("status").inner_text().lower()
    screenshot(phone, "pay-page-not-found")
