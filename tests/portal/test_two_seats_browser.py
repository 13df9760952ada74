"""One person never in two seats, in a real browser (Debian chromium through Playwright, against live_server): an
owner's invite of a second account waits for another owner, and once approved and accepted, that account is told why
it cannot approve its maker's batch; a sole owner's batch page says to ask our staff. Screenshots at 1280 and 390 px
(var/screenshots/ or $SCREENSHOT_DIR)."""

import pytest

from apps.payout_batches.models import PayoutBatch
from apps.payout.models import Payout
from apps.portal.models import Invite
from tests.helpers import screenshot
from tests.payout.conftest import fund
from tests.portal.support import browser_sign_in, portal_user
from tests.portal.team import step_up_code
from tests.support.browser import chromium

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def shots(page, name: str) -> None:
    """The page at 1280 px, then at 390 px (a phone; nothing may scroll sideways), then back."""
    screenshot(page, f"{name}-1280")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, f"{name} scrolls sideways at 390 px"
    screenshot(page, f"{name}-390")
    page.set_viewport_size({"width": 1280, "height": 900})


def ask_for_one_payout(page, base: str, number: str) -> PayoutBatch:
    page.goto(f"{base}/portal/payouts/new/")
    page.fill("#id_mch_order_no", number)
    page.fill("#id_amount", "250.00")
    page.fill("#id_payee_name", "Juan dela Cruz")
    page.fill("#id_payee_account", "0012345678")
    page.fill("#id_bank_code", "BDO")
    page.click("#single-form button[type=submit]")
    page.wait_for_selector("#batch-status")
    return PayoutBatch.objects.get(rows__mch_order_no=number)


def test_a_second_account_of_the_maker_is_refused_in_the_browser(live_server, merchant):
    from tests.common.test_staff_signin_browser import code_from_secret

    fund(merchant, 10_000_000)
    olivia = portal_user(merchant, "owner", username="olivia@acme.example")
    ben = portal_user(merchant, "owner", username="ben@acme.example")
    fina = portal_user(merchant, "finance", username="fina@acme.example")
    base = live_server.url
    with chromium() as browser:
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.set_default_timeout(20_000)
        browser_sign_in(page, base, olivia.username)
        batch = ask_for_one_payout(page, base, "seat-browser-1")
        page.goto(f"{base}/portal/team/")
        page.fill("#id_username", "olivia.alt@example.com")
        page.select_option("#id_role", "owner")
        page.click("#invite-form button[type=submit]")
        link = page.inner_text("#invite-link")
        assert "independent of you" in page.inner_text("#messages")
        assert "Waiting for a second owner" in page.inner_text("#invites")
        shots(page, "portal-team-owner-invite-waiting")
        # Making Fina an owner waits for Ben too.
        row = page.locator(f"tr[data-member='{fina.username}']")
        row.locator("select[name=role]").select_option("owner")
        row.locator("button[type=submit]").click()
        page.wait_for_selector("#messages")
        assert "waits for another owner" in page.inner_text("#messages")
        assert "waiting for a second owner's approval" in page.inner_text(f"tr[data-member='{fina.username}']")

        newcomer = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
        newcomer.goto(link)
        assert "waiting for a second owner" in newcomer.inner_text("#invite-invalid")
        screenshot(newcomer, "portal-invite-waiting-390")

        checker = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        checker.set_default_timeout(20_000)
        browser_sign_in(checker, base, ben.username, next_path="/portal/team/")
        shots(checker, "portal-team-approve-invite")
        checker.fill(".approve-owner-form input[name=code]", step_up_code(ben))
        checker.click(".approve-owner-form button[type=submit]")
        checker.wait_for_selector("#messages")
        assert "fina@acme.example is an owner now" in checker.inner_text("#messages")
        checker.fill(".approve-invite-form input[name=code]", step_up_code(ben))
        checker.click(".approve-invite-form button[type=submit]")
        checker.wait_for_selector("#messages")
        assert "works now" in checker.inner_text("#messages")
        assert Invite.objects.get(username="olivia.alt@example.com").approved_by_id == ben.pk

        newcomer.goto(link)
        newcomer.fill("#id_password1", "a-long-new-password-17")
        newcomer.fill("#id_password2", "a-long-new-password-17")
        newcomer.click("#invite-form button[type=submit]")
        newcomer.wait_for_selector("#signin-form")
        newcomer.fill("#id_username", "olivia.alt@example.com")
        newcomer.fill("#id_password", "a-long-new-password-17")
        newcomer.click("#signin-form button[type=submit]")
        newcomer.wait_for_selector("#signin-qr svg")
        newcomer.fill("#id_code", code_from_secret(newcomer.inner_text("#signin-secret")))
        newcomer.click("#code-form button[type=submit]")
        newcomer.wait_for_selector("#recovery-codes")
        newcomer.click("#signin-continue")
        newcomer.wait_for_selector("#portal-nav")
        newcomer.goto(f"{base}/portal/payouts/batches/{batch.pk}/")
        problem = newcomer.inner_text("#checker-problem")
        assert "olivia@acme.example invited olivia.alt@example.com" in problem
        assert newcomer.locator("#approve-form").count() == 0
        newcomer.set_viewport_size({"width": 1280, "height": 900})
        shots(newcomer, "portal-batch-not-independent")
        assert PayoutBatch.objects.get(pk=batch.pk).status == "PENDING" and Payout.objects.count() == 0


def test_a_sole_owners_batch_page_says_to_ask_staff_for_a_second_owner(live_server, merchant):
    fund(merchant, 10_000_000)
    olivia = portal_user(merchant, "owner", username="olivia@acme.example")
    base = live_server.url
    with chromium() as browser:
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.set_default_timeout(20_000)
        browser_sign_in(page, base, olivia.username)
        ask_for_one_payout(page, base, "sole-browser-1")
        assert "Ask our staff to verify and invite a second owner" in page.inner_text("#no-checker")
        shots(page, "portal-batch-no-second-owner")
        page.goto(f"{base}/portal/team/")
        assert "Ask our staff" in page.inner_text("#no-second-owner")
        shots(page, "portal-team-no-second-owner")
