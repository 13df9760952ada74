"""The portal in a real browser (Debian chromium through Playwright, against live_server): sign-in with a TOTP code
computed from the authenticator's key, every page used at 1280 px and at 390 px, screenshots of each kept in
$SCREENSHOT_DIR (or var/screenshots/) as the other browser tests do."""

import csv
import io

import pytest

from apps.callbacks.deliver import callback_deliver
from apps.callbacks.models import CallbackEvent
from apps.ledger.statements import statement_today
from tests.helpers import screenshot
from tests.portal.support import browser_sign_in, portal_user
from tests.support.browser import chromium, contexts_closed
from tests.support.receiver import Reply

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDE, PHONE = 1280, 390


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
def page(browser):
    context = browser.new_context(viewport={"width": WIDE, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    failed = []
    # An aborted request is not a blocked one: a download ends its navigation so, and a page left (or closed) while
    # its favicon still loads cancels that load. What the policy blocks fails otherwise (net::ERR_BLOCKED_BY_...).
    page.on("requestfailed", lambda request: None if request.failure == "net::ERR_ABORTED"
            else failed.append(f"{request.url}: {request.failure}"))
    page.on("console", lambda message: failed.append(message.text) if message.type == "error" else None)
    yield page
    context.close()
    assert failed == []  # nothing blocked by the policy, nothing from elsewhere


def both_widths(page, name: str) -> None:
    """Screenshots at 1280 and 390 px; at 390 the page must not scroll sideways (tables scroll in their box)."""
    for width in (WIDE, PHONE):
        page.set_viewport_size({"width": width, "height": 900 if width == WIDE else 844})
        overflow = page.evaluate("document.documentElement.scrollWidth")
        assert overflow <= width, f"{name} is {overflow} px wide at {width} px"
        screenshot(page, f"portal-{name}-{width}")
    page.set_viewport_size({"width": WIDE, "height": 900})


def test_finance_finds_a_payout_sees_why_its_callback_failed_resends_it_and_downloads_statements(
        page, live_server, shops, callback_receiver):
    a, b = shops
    user = portal_user(a.merchant, "finance")
    browser_sign_in(page, live_server.url, user.username)
    assert page.url == f"{live_server.url}/portal/"
    assert page.inner_text("#portal-merchant").startswith(a.merchant.name)
    assert "Statements" in page.inner_text("#portal-nav") and "Team" not in page.inner_text("#portal-nav")
    assert "₱" in page.inner_text('[data-testid="available-PHP"]')
    both_widths(page, "home")

    # Find a payout by its order number.
    page.click("#portal-nav >> text=Payouts")
    page.fill("input[name=q]", a.payout.mch_order_no)
    page.click("#filters button[type=submit]")
    page.wait_for_selector(f'tr[data-order="{a.payout.platform_order_no}"]')
    assert page.locator("#order-list tbody tr").count() == 1
    both_widths(page, "payouts")
    page.click(f'tr[data-order="{a.payout.platform_order_no}"] a')
    page.wait_for_selector("#order-facts")
    assert "PROCESSING" in page.inner_text("#history")
    both_widths(page, "payout")

    # B's number finds nothing.
    page.goto(f"{live_server.url}/portal/payouts/?q={b.payout.mch_order_no}")
    page.wait_for_selector("#no-orders")

    # The pay-in's callback failed: the reply is on the page; send it again, then it is delivered.
    page.goto(f"{live_server.url}/portal/payins/?q={a.payin.mch_order_no}")
    page.click(f'tr[data-order="{a.payin.platform_order_no}"] a')
    event = page.locator(f"#event-{a.event.pk}")
    assert "dead" in event.locator('[data-testid="event-status"]').inner_text()
    assert "boom" in event.inner_text() and "HTTP 500" in event.inner_text()
    both_widths(page, "payin-failed-callback")
    callback_receiver.script(Reply(200, "success"))
    event.locator('[data-testid="resend"]').click()
    page.wait_for_selector("#messages")
    assert "being sent again" in page.inner_text("#messages")
    assert CallbackEvent.objects.get(pk=a.event.pk).status == "pending"
    callback_deliver(event_id=a.event.pk)  # the worker's part (the broker is not running in this test)
    page.reload()
    assert "delivered" in page.locator(f"#event-{a.event.pk} [data-testid=event-status]").inner_text()
    assert "re-send" in page.inner_text(f"#event-{a.event.pk}")
    screenshot(page, "portal-payin-resent-1280")

    # Today's statement on the page, then its signed CSV and its JSON as downloads.
    page.click("#portal-nav >> text=Statements")
    page.fill("input[name=date]", statement_today().isoformat())
    page.select_option("select[name=currency]", "PHP")
    page.click("#statement-form button[type=submit]")
    page.wait_for_selector("#statement-movements")
    assert a.payin.platform_order_no in page.inner_text("#statement-movements")
    both_widths(page, "statements")
    with page.expect_download() as download:
        page.click("#download-csv")
    csv_text = open(download.value.path(), encoding="utf-8").read()
    assert f"# merchant_no={a.merchant.merchant_no}" in csv_text and b.payin.platform_order_no not in csv_text
    with page.expect_download() as download:
        page.click("#download-json")
    assert download.value.suggested_filename.endswith(".json")

    # The payouts list as CSV.
    page.goto(f"{live_server.url}/portal/payouts/")
    with page.expect_download() as download:
        page.click("#export-csv")
    rows = list(csv.DictReader(io.StringIO(open(download.value.path(), encoding="utf-8").read())))
    assert [row["mch_order_no"] for row in rows] == [a.payout.mch_order_no]
    assert rows[0]["payee_account"] == "••••5678"

    page.click("#portal-signout")
    page.wait_for_selector("#signin-form")
    page.goto(f"{live_server.url}/portal/")
    assert "/portal/signin/" in page.url


def test_owner_invites_a_person_who_sets_a_password_and_enrols_an_authenticator(browser, page, live_server,
                                                                               merchant):
    from tests.common.test_staff_signin_browser import code_from_secret

    owner = portal_user(merchant, "owner")
    browser_sign_in(page, live_server.url, owner.username, next_path="/portal/team/")
    assert page.url.endswith("/portal/team/")
    page.fill("#id_username", "dev@acme.example")
    page.select_option("#id_role", "developer")
    page.click("#invite-form button[type=submit]")
    link = page.inner_text("#invite-link")
    assert "/portal/invite/" in link
    both_widths(page, "team")

    newcomer = browser.new_context(viewport={"width": PHONE, "height": 844}).new_page()
    newcomer.goto(link)
    assert newcomer.inner_text("#invite-username") == "dev@acme.example"
    screenshot(newcomer, "portal-invite-390")
    newcomer.fill("#id_password1", "a-long-new-password-17")
    newcomer.fill("#id_password2", "a-long-new-password-17")
    newcomer.click("#invite-form button[type=submit]")
    newcomer.wait_for_selector("#signin-form")
    newcomer.fill("#id_username", "dev@acme.example")
    newcomer.fill("#id_password", "a-long-new-password-17")
    newcomer.click("#signin-form button[type=submit]")
    newcomer.wait_for_selector("#signin-qr svg")
    screenshot(newcomer, "portal-enrol-390")
    newcomer.fill("#id_code", code_from_secret(newcomer.inner_text("#signin-secret")))
    newcomer.click("#code-form button[type=submit]")
    newcomer.wait_for_selector("#recovery-codes")
    assert newcomer.locator("#recovery-codes li").count() == 10
    newcomer.click("#signin-continue")
    newcomer.wait_for_selector("#portal-nav")
    assert "Developer" in newcomer.inner_text("#portal-user")
    assert "Statements" not in newcomer.inner_text("#portal-nav")
    screenshot(newcomer, "portal-home-developer-390")
    # The link is used up.
    newcomer.goto(link)
    assert newcomer.inner_text("#invite-invalid")
    newcomer.context.close()

    page.reload()
    assert "dev@acme.example" in page.inner_text("#members")


def test_sign_in_pages_at_both_widths_and_a_wrong_code(page, live_server, merchant):
    user = portal_user(merchant, "viewer")
    page.goto(f"{live_server.url}/portal/")
    assert "/portal/signin/" in page.url
    both_widths(page, "signin")
    page.fill("#id_username", user.username)
    page.fill("#id_password", "pw-for-tests-1")
    page.click("#signin-form button[type=submit]")
    page.wait_for_selector("#id_code")
    from tests.support.staff import totp_code

    right = totp_code(user.totpdevice_set.get())
    page.fill("#id_code", "000000" if right != "000000" else "111111")
    page.click("#code-form button[type=submit]")
    assert "not right" in page.inner_text("#signin-error")
    both_widths(page, "signin-code")
