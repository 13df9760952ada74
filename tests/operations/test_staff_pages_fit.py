"""The staff pages fit a 1280 px window: every admin changelist, the operations overview, the
decision page and the staff-request form, signed in as a superuser (who sees every column, filter and action) with
realistic data: long merchant and payee names, 64-character merchant order numbers, long callback errors.
`document.documentElement.scrollWidth` must not pass 1280. Screenshots: var/screenshots/fit-*.png."""

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.collection.refunds import OUTCOME_FAILED, refund_channel_result, refund_create
from apps.collection.services import collection_create, collection_notify_paid
from apps.collection.models import Refund
from apps.common.models import StaffRequest
from apps.common.staff_requests import staff_request_create
from tests.conftest import make_merchant
from tests.helpers import screenshot
from tests.payout.conftest import PHP_THRESHOLD, adapter_calls, fund, new_payout, payout_in, staff_user  # noqa: F401
from tests.support.browser import chromium, contexts_closed
from tests.support.staff import PASSWORD, add_authenticator, browser_sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTH = 1280
LONG_NAME = "Sari-Sari Store and General Merchandise of Barangay San Isidro Labrador Incorporated"
LONG_PAYEE = "Maria Clara Fernandez de los Santos y Ibarra-Villanueva"


def long_order(prefix: str, i: int) -> str:
    return f"{prefix}-2026-11-25-shopify-checkout-session-{i:04d}-a9f3c2e1b7d4f6a8c0e2"[:64]


@pytest.fixture
def realistic(bootstrapped, rsa_keys, adapter_calls):
    ctx = make_merchant(rsa_keys[2], name=LONG_NAME, currencies=("PHP", "USD"),
                        collection_callback_url="https://callbacks.sari-sari-store.example.ph/payments/collection",
                        payout_callback_url="https://callbacks.sari-sari-store.example.ph/payments/payout/notify")
    fund(ctx, 900_000_000)
    for i in range(3):
        order = collection_create(merchant=ctx.merchant, mch_order_no=long_order("PAYIN", i),
                                  product_code="PHP_COLLECT_D1", amount=4_987_654 + i, currency="PHP",
                                  subject="A very long order subject line " * 3)
        collection_notify_paid(platform_order_no=order.platform_order_no)
    for i, amount in enumerate((1_234_567, 98_799)):  # the second one FAILED, with the sandbox's reason
        refund = refund_create(merchant=ctx.merchant, platform_order_no=order.platform_order_no,
                               mch_refund_no=long_order("REFUND", i), amount=amount, reason="Returned goods " * 10)
        if i:
            refund_channel_result(refund_no=refund.refund_no, outcome=OUTCOME_FAILED,
                                  fail_reason="the sandbox fails every refund whose amount ends in 99")
    payouts = [payout_in(ctx, "SUCCESS", mch_order_no=long_order("PAYOUT", 1), payee_name=LONG_PAYEE,
                         payee_account="0012345678901234567", amount=4_876_543),
               new_payout(ctx, mch_order_no=long_order("PAYOUT", 2), payee_name=LONG_PAYEE, amount=PHP_THRESHOLD,
                          payee_account="0099887766554433")]
    long_error = ("connection failed: HTTPSConnectionPool(host='callbacks.sari-sari-store.example.ph', port=443): "
                  "Max retries exceeded with url: /payments/payout/notify (Caused by NewConnectionError: Failed to "
                  "establish a new connection: [Errno 111] Connection refused)")
    CallbackEvent.objects.update(status=CallbackEvent.Status.DEAD, attempts_count=9, last_error=long_error)
    for event in CallbackEvent.objects.all():
        CallbackAttempt.objects.create(event=event, number=1, started_at=timezone.now(), url=event.url,
                                       key_version=1, http_status=502, success=False, request_body={"a": 1},
                                       response_excerpt="<html><head><title>502 Bad Gateway</title></head>" * 3,
                                       error=long_error, duration_ms=30_001)
    ops = staff_user("otto-the-operations-engineer", "Payout operations")
    staff_request_create(kind=StaffRequest.Kind.BALANCE_ADJUSTMENT, requested_by=ops,
                         payload={"merchant_no": ctx.merchant_no, "currency": "PHP", "amount": 123_456_789},
                         reason="Refund of the duplicate settlement of 25 November, ticket OPS-20261125-0042 " * 2)
    return ctx, payouts


@pytest.fixture(scope="module")
def module_browser():
    """One Chromium for this module's tests (one xdist worker runs them all: tests/conftest.py); each test gets it
    with its contexts closed afterwards (tests/support/browser.py: contexts_closed)."""
    with chromium() as browser:
        yield browser


@pytest.fixture
def superuser_page(live_server, module_browser):
    user = get_user_model().objects.create_superuser("sam-the-superuser", password=PASSWORD)
    add_authenticator(user)
    with contexts_closed(module_browser) as browser:
        context = browser.new_context(viewport={"width": WIDTH, "height": 900})
        context.set_default_timeout(15_000)
        page = context.new_page()
        browser_sign_in(page, live_server.url, user.username)
        yield page


# How wide the page would have to be to show everything: the document's width, and that of any box scrolling its
# content sideways (the admin wraps a changelist's table in `.results { overflow-x: auto }`, so a too-wide table
# scrolls inside the page while the document itself stays 1280 px).
NEEDED_WIDTH = """() => {
  let needed = document.documentElement.scrollWidth;
  for (const el of document.querySelectorAll('body *')) {
    const style = getComputedStyle(el);
    if (['auto', 'scroll'].includes(style.overflowX) && el.scrollWidth > el.clientWidth + 1) {
      needed = Math.max(needed, document.documentElement.scrollWidth + el.scrollWidth - el.clientWidth);
    }
  }
  return needed;
}"""


def overflow(page) -> int:
    """Pixels beyond the 1280 px window that a person would have to scroll sideways to see."""
    return page.evaluate(NEEDED_WIDTH) - WIDTH


def changelists() -> list[str]:
    names = []
    for model, model_admin in admin.site._registry.items():
        opts = model._meta
        names.append(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    return sorted(names)


def test_every_changelist_fits_1280_px(realistic, superuser_page, live_server):
    page = superuser_page
    too_wide = {}
    for name in changelists():
        page.goto(live_server.url + reverse(name))
        page.wait_for_load_state()
        if overflow(page) > 0:
            too_wide[name] = overflow(page) + WIDTH
        screenshot(page, f"fit-{name.split(':')[1]}", full_page=False)
    assert not too_wide, f"changelists wider than {WIDTH} px: {too_wide}"


def test_the_overview_the_decision_page_and_the_request_form_fit_1280_px(realistic, superuser_page, live_server):
    ctx, (paid, frozen) = realistic
    page = superuser_page
    pages = {"overview": "/admin/operations/operationsoverview/",
             "decide": f"/admin/payout/payoutreviewqueue/{frozen.pk}/decide/",
             "decide-reversible": f"/admin/payout/payoutreviewqueue/{paid.pk}/decide/",
             "payout": f"/admin/payout/payout/{paid.pk}/change/",
             "payin-with-refunds": f"/admin/collection/collectionorder/{Refund.objects.first().order_id}/change/",
             "refund": f"/admin/collection/refund/{Refund.objects.first().pk}/change/",
             "adjustment": "/admin/common/staffrequest/add/",
             "index": "/admin/"}
    too_wide = {}
    for name, path in pages.items():
        page.goto(live_server.url + path)
        page.wait_for_load_state()
        if overflow(page) > 0:
            too_wide[name] = overflow(page) + WIDTH
        screenshot(page, f"fit-page-{name}")
    assert not too_wide, f"pages wider than {WIDTH} px: {too_wide}"


def test_ask_for_a_balance_adjustment_with_a_live_preview_in_major_units(realistic, superuser_page, live_server):
    ctx, _ = realistic
    page = superuser_page
    page.goto(live_server.url + "/admin/common/staffrequest/")
    button = page.locator("#ask-adjustment")
    label = button.text_content().strip()  # (the admin shows object tools in capitals)
    button.click()
    page.wait_for_selector("#id_amount")
    assert label == "Ask for a balance adjustment" == page.locator("#content h1").inner_text().strip()
    assert "Ask for a balance adjustment" in page.locator(".breadcrumbs").inner_text()

    page.fill("#id_merchant_no", ctx.merchant_no)
    page.fill("#id_currency", "php")
    page.fill("#id_amount", "123456789")
    preview = page.locator("#amount-preview")
    assert preview.inner_text() == "Credit \u20b11,234,567.89 PHP to the merchant's available balance"
    page.fill("#id_amount", "-5")
    assert preview.inner_text().startswith("Debit \u20b10.05 PHP from")
    page.fill("#id_currency", "KWD")
    page.fill("#id_amount", "1250")
    assert "1.250 KWD" in preview.inner_text()  # three decimals
    page.fill("#id_currency", "JPY")
    page.fill("#id_amount", "9007199254740991")  # the largest amount: exact, no floating point
    assert "9,007,199,254,740,991 JPY" in preview.inner_text()
    page.fill("#id_currency", "XXX")
    assert "Type the currency code" in preview.inner_text()
    page.fill("#id_currency", "PHP")
    page.fill("#id_amount", "250000")
    page.fill("#id_reason", "Refund of the duplicate settlement, ticket OPS-42")
    screenshot(page, "staff-request-adjustment-preview")
    page.click("input[type=submit]")
    page.wait_for_selector("ul.messagelist")
    request = StaffRequest.objects.latest("pk")
    assert request.payload["amount"] == 250_000 and "\u20b12,500.00" in request.summary
