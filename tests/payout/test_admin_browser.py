"""The review queue in a real headless browser (Debian chromium through Playwright) against live_server."""

import pytest
from django.contrib.auth.models import User

from apps.payout.models import Payout
from apps.payout.services import payout_create
from tests.conftest import make_merchant
from tests.helpers import screenshot
from tests.payout.conftest import PHP_THRESHOLD, balances, fund, payout_params, staff_user
from tests.support.browser import chromium, contexts_closed
from tests.support.staff import add_authenticator, browser_sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-1"
FUNDS = 20_000_000


@pytest.fixture(scope="module")
def module_browser():
    """One Chromium for this module's tests (one xdist worker runs them all: tests/conftest.py); each test gets it
    with its contexts closed afterwards (tests/support/browser.py: contexts_closed)."""
    with chromium() as browser:
        yield browser


@pytest.fixture
def page(module_browser):
    with contexts_closed(module_browser) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(15_000)
        yield page


@pytest.fixture
def shop(bootstrapped, rsa_keys, callback_receiver):
    ctx = make_merchant(rsa_keys[2], name="Browser Shop", payout_callback_url=callback_receiver.url)
    fund(ctx, FUNDS)
    return ctx


def frozen_payout(ctx) -> Payout:
    payout = payout_create(merchant=ctx.merchant, **payout_params(amount=PHP_THRESHOLD, payee_account="0012349876"))
    assert payout.status == "FROZEN"
    return payout


def log_in(page, live_server, username: str, next_path: str) -> None:
    """The password, then the code of the user's authenticator app (computed by the test)."""
    add_authenticator(User.objects.get(username=username))
    browser_sign_in(page, live_server.url, username, password=PASSWORD, next_path=next_path)


def run_action(page, payout: Payout, action: str) -> None:
    page.check(f"input[name=_selected_action][value='{payout.pk}']")
    page.select_option("select[name=action]", action)
    page.click("button[name=index]")


def test_risk_reviewer_rejects_frozen_payout_in_the_browser(page, live_server, shop, callback_receiver,
                                                            live_celery_worker):
    payout = frozen_payout(shop)
    staff_user("rita", "Risk reviewer")
    log_in(page, live_server, "rita", "/admin/payout/payoutreviewqueue/")

    row = page.locator("#result_list tbody tr", has_text=payout.platform_order_no[-6:])  # shortened in the queue
    row.wait_for()
    assert row.count() == 1
    assert "\u2022\u2022\u2022\u20229876" in row.inner_text() and "0012349876" not in page.content()
    assert "amount" in row.inner_text() and "0/1" in row.inner_text()  # reason tag, approvals so far
    screenshot(page, "admin-review-queue")

    run_action(page, payout, "reject_selected")
    page.fill("textarea[name=reason]", "Payee name does not match the account holder")
    screenshot(page, "admin-reject-form")
    page.click("input[type=submit][value=Reject]")
    page.wait_for_selector("ul.messagelist")
    assert "rejected" in page.locator("ul.messagelist").inner_text()
    assert page.locator("#result_list tbody tr", has_text=payout.platform_order_no[-6:]).count() == 0  # left
    screenshot(page, "admin-review-queue-after-reject")

    payout.refresh_from_db()
    assert (payout.status, payout.fail_reason) == ("REJECTED", "Payee name does not match the account holder")
    assert balances(shop) == {"available": FUNDS, "settling": 0, "frozen": 0}
    [callback] = [r.body for r in callback_receiver.wait_for(1)]
    assert (callback["platform_order_no"], callback["status"], callback["fail_reason"]) == (
        payout.platform_order_no, "REJECTED", "Payee name does not match the account holder")

    page.goto(f"{live_server.url}/admin/payout/payout/{payout.pk}/change/")
    trail = page.content()
    assert "payout.reject" in trail and "rita" in trail and "0012349876" not in trail
    screenshot(page, "admin-payout-change-with-audit-trail")


def test_reviewer_who_administers_the_merchant_is_refused_in_the_browser(page, live_server, shop):
    payout = frozen_payout(shop)
    rita = staff_user("rita", "Risk reviewer")
    shop.merchant.administrators.add(rita)
    log_in(page, live_server, "rita", "/admin/payout/payoutreviewqueue/")
    run_action(page, payout, "approve_selected")
    page.fill("textarea[name=reason]", "looks fine to me")  # approving asks for a reason and a confirmation
    page.click("input[type=submit][value=Approve]")
    page.wait_for_selector("ul.messagelist")  # the action's response: it has been decided by now
    assert "administers" in page.locator("ul.messagelist").inner_text()
    screenshot(page, "admin-approve-refused-to-merchant-administrator")
    payout.refresh_from_db()
    assert payout.status == "FROZEN"


def test_staff_without_review_permission_cannot_open_the_queue_in_the_browser(page, live_server, shop):
    frozen_payout(shop)
    staff_user("clerk")
    log_in(page, live_server, "clerk", "/admin/")
    assert "Payout review queue" not in page.content()
    screenshot(page, "admin-index-without-review-permission")
    response = page.goto(f"{live_server.url}/admin/payout/payoutreviewqueue/")
    assert response.status == 403
    screenshot(page, "admin-review-queue-forbidden")
