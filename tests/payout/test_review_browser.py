"""The reviewer's page in a real browser at 1280 and 1920 px: the queue on one line per payout,
the decision page with confirmed Approve and Reject, and four eyes end to end. Screenshots: var/screenshots/."""

import pytest
from django.contrib.auth import get_user_model

from apps.merchants.models import MerchantCurrency
from apps.payout.models import Payout
from apps.payout.services import payout_create
from tests.conftest import make_merchant
from tests.helpers import screenshot
from tests.payout.conftest import PHP_THRESHOLD, fund, payout_params, staff_user
from tests.support.browser import chromium, contexts_closed
from tests.support.staff import add_authenticator, browser_sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-1"
DUAL = 8_000_000  # 80,000.00 PHP
QUEUE = "/admin/payout/payoutreviewqueue/"


@pytest.fixture(scope="module")
def module_browser():
    """One Chromium for this module's tests (one xdist worker runs them all: tests/conftest.py); each test gets it
    with its contexts closed afterwards (tests/support/browser.py: contexts_closed)."""
    with chromium() as browser:
        yield browser


@pytest.fixture
def browser(module_browser):
    with contexts_closed(module_browser) as browser:
        yield browser


@pytest.fixture
def shop(bootstrapped, rsa_keys):
    ctx = make_merchant(rsa_keys[2], name="Browser Shop With A Long Trading Name")
    fund(ctx, 90_000_000)
    MerchantCurrency.objects.filter(merchant=ctx.merchant, currency_id="PHP").update(
        payout_dual_approval_threshold=DUAL)
    return ctx


def new_page(browser, width: int):
    """A page in a context of its own (a person's browser): more tabs of it share its session."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(15_000)
    return context.new_page()


def log_in(page, live_server, username: str, next_path: str) -> None:
    add_authenticator(get_user_model().objects.get(username=username))
    browser_sign_in(page, live_server.url, username, password=PASSWORD, next_path=next_path)


def queue_of_payouts(ctx) -> list[Payout]:
    payouts = []
    for i, (amount, account) in enumerate([(PHP_THRESHOLD, "0012349876"), (DUAL, "0099887766554433"),
                                           (PHP_THRESHOLD + 123_45, "0012349876")]):
        payouts.append(payout_create(merchant=ctx.merchant, **payout_params(
            amount=amount, payee_account=account, payee_name="Maria Clara de los Santos y Ibarra")))
    return payouts


@pytest.mark.parametrize("width", [1280, 1920])
def test_review_queue_fits_the_window_one_line_per_payout(browser, live_server, shop, width):
    payouts = queue_of_payouts(shop)
    staff_user("rita", "Risk reviewer")
    page = new_page(browser, width)
    log_in(page, live_server, "rita", QUEUE)
    rows = page.locator("#result_list tbody tr")
    rows.first.wait_for()
    assert rows.count() == len(payouts)
    screenshot(page, f"review-queue-{width}")
    # Nothing cut off: the table is no wider than the window, and every row is one line of text.
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow}px at {width}px"
    clipped = page.evaluate("() => { const r = document.querySelector('#changelist .results');"
                            " return r.scrollWidth - r.clientWidth; }")
    assert clipped <= 0, f"the queue's table is cut off by {clipped}px at {width}px"
    heights = page.evaluate("() => [...document.querySelectorAll('#result_list tbody tr')].map(r => r.offsetHeight)")
    assert max(heights) <= 40, heights
    text = rows.nth(1).inner_text()
    assert "\u20b180,000.00 PHP" in text and "0/2" in text and "2 approvals" in text and shop.merchant_no in text
    assert "\u2022\u2022\u2022\u20224433" in text and "0099887766554433" not in page.content()


@pytest.mark.parametrize("width", [1280, 1920])
def test_two_reviewers_approve_a_large_payout_from_its_decision_page(browser, live_server, shop, width):
    small, big, _ = queue_of_payouts(shop)
    Payout.objects.filter(pk=small.pk).update(status="REJECTED")  # history for this payee account
    staff_user("rita", "Risk reviewer")
    staff_user("rolf", "Risk reviewer")
    page = new_page(browser, width)
    log_in(page, live_server, "rita", QUEUE)
    page.locator("#result_list tbody tr", has_text="2 approvals").locator("a").first.click()
    page.wait_for_selector("#decide")
    html = page.content()
    assert "two-approval threshold" in html and "review threshold" in html  # the reasons in words
    assert "Available" in html and "\u20b1" in page.inner_text("#decide-available")
    assert "\u20b180,000.00 PHP" in page.inner_text("#decide-amount")
    assert "0099887766554433" not in html and "UTC" in html
    screenshot(page, f"review-decide-{width}")

    # Approve without a reason: the browser refuses to send the form (the server would refuse it too).
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("#approve-button")
    page.wait_for_timeout(300)
    assert page.evaluate("() => document.querySelector('textarea[name=reason]').validity.valueMissing")
    assert Payout.objects.get(pk=big.pk).approvals.count() == 0

    # Cancelled confirmation: nothing happens.
    messages = []

    def dismiss(dialog):
        messages.append(dialog.message)
        dialog.dismiss()

    page2 = page.context.new_page()  # rita's signed-in session, a new tab
    page2.goto(f"{live_server.url}/admin/payout/payoutreviewqueue/{big.pk}/decide/")
    page2.on("dialog", dismiss)
    page2.fill("textarea[name=reason]", "invoice 2211 matches")
    page2.click("#approve-button")
    page2.wait_for_timeout(500)
    assert messages and "\u20b180,000.00 PHP" in messages[0] and "two approvals" in messages[0]
    assert Payout.objects.get(pk=big.pk).approvals.count() == 0

    # Confirmed: rita's approval counts as one of two.
    page3 = page.context.new_page()  # rita's signed-in session, a new tab
    page3.goto(f"{live_server.url}/admin/payout/payoutreviewqueue/{big.pk}/decide/")
    page3.on("dialog", lambda dialog: dialog.accept())
    page3.fill("textarea[name=reason]", "invoice 2211 matches")
    page3.click("#approve-button")
    page3.wait_for_selector("ul.messagelist")
    assert "1/2" in page3.inner_text("#decide-approvals")
    assert Payout.objects.get(pk=big.pk).status == "FROZEN"
    screenshot(page3, f"review-decide-one-of-two-{width}")

    # rita again: nothing left for her to press (the service refuses a second decision anyway).
    assert page3.locator("#approve-button").count() == 0 and page3.locator("#reject-button").count() == 0
    assert "waits for a second reviewer" in page3.inner_text("#decide-done")

    # rolf: the second pair of eyes.
    page4 = new_page(browser, width)
    log_in(page4, live_server, "rolf", f"/admin/payout/payoutreviewqueue/{big.pk}/decide/")
    page4.on("dialog", lambda dialog: dialog.accept())
    page4.fill("textarea[name=reason]", "called the payee")
    page4.click("#approve-button")
    page4.wait_for_selector("ul.messagelist")
    assert Payout.objects.get(pk=big.pk).status != "FROZEN"
    screenshot(page4, f"review-decide-approved-{width}")


def test_reject_confirmation_shows_money_in_major_units(browser, live_server, shop):
    payout = queue_of_payouts(shop)[0]
    staff_user("rita", "Risk reviewer")
    page = new_page(browser, 1280)
    log_in(page, live_server, "rita", f"/admin/payout/payoutreviewqueue/{payout.pk}/decide/")
    seen = []
    page.on("dialog", lambda dialog: (seen.append(dialog.message), dialog.accept()))
    page.fill("textarea[name=reason]", "payee name mismatch")
    page.click("#reject-button")
    page.wait_for_selector("ul.messagelist")
    assert "\u20b150,000.00 PHP" in seen[0] and "5000000" not in seen[0]
    assert Payout.objects.get(pk=payout.pk).status == "REJECTED"
    screenshot(page, "review-decide-rejected-1280")
