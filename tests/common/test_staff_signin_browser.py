"""Staff sign-in in a real browser (Debian chromium through Playwright, against live_server): the password, then a
TOTP code the test computes from the authenticator's secret, as a phone would; enrolment on the first sign-in; a
recovery code instead of the phone."""

import base64
import io
import json
import time

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.management import call_command
from django_otp.plugins.otp_totp.models import TOTPDevice

from tests.helpers import screenshot
from tests.support.browser import chromium, contexts_closed
from tests.support.staff import PASSWORD, add_authenticator, browser_sign_in, totp_code

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def module_browser():
    """One Chromium for this module's tests (one xdist worker runs them all: tests/conftest.py); each test gets it
    with its contexts closed afterwards (tests/support/browser.py: contexts_closed)."""
    with chromium() as browser:
        yield browser


@pytest.fixture
def page(module_browser):
    with contexts_closed(module_browser) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(15_000)
        yield page


def create_staff(username: str, role: str) -> dict:
    out = io.StringIO()
    call_command("create_staff", username, "--role", role, "--password-stdin", stdin=io.StringIO(PASSWORD + "\n"),
                 stdout=out)
    return json.loads(out.getvalue())


def code_from_secret(secret_text: str) -> str:
    """What an authenticator app shows for the secret the enrolment page printed (typed in instead of the QR)."""
    key = base64.b32decode(secret_text.replace(" ", ""))
    device = TOTPDevice(key=key.hex())  # only for its step, t0 and digits: the defaults an app assumes
    device.refresh_from_db = lambda: None
    return totp_code(device)


def test_first_sign_in_enrols_the_authenticator_then_shows_recovery_codes_once(page, live_server):
    create_staff("nora", "risk-reviewer")
    page.goto(f"{live_server.url}/admin/")
    assert "/admin/login/" in page.url
    page.fill("#id_username", "nora")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")

    page.wait_for_selector("#signin-qr svg")  # the QR code, and its secret for typing in
    assert "/admin/login/enrol/" in page.url
    secret = page.inner_text("#signin-secret")
    screenshot(page, "staff-signin-enrol")
    assert page.request.get(f"{live_server.url}/admin/").url.startswith(f"{live_server.url}/admin/login/")  # not yet in

    # The clock (of this process, so of the live server's thread too) stands still from the wrong code to the retry
    # "at once": on a busy machine a real second passed between the two submissions, past the throttle, and the retry
    # was let in. The second that makes it allowed again is then moved, not waited for.
    with time_machine.travel(time.time(), tick=False) as clock:
        page.fill("#id_code", "000000" if code_from_secret(secret) != "000000" else "111111")
        page.click("input[type=submit]")
        assert "not right" in page.inner_text(".errornote")
        assert not TOTPDevice.objects.filter(user__username="nora", confirmed=True).exists()

        page.fill("#id_code", code_from_secret(secret))
        page.click("input[type=submit]")  # at once: refused for a moment after a wrong code (guessing is throttled)
        assert "wait a few seconds" in page.inner_text(".errornote")
        clock.shift(1.1)
        page.fill("#id_code", code_from_secret(secret))
        page.click("input[type=submit]")
        page.wait_for_selector("#recovery-codes")
    codes = page.locator("#recovery-codes li").all_inner_texts()
    assert len(codes) == 10 and len(set(codes)) == 10
    screenshot(page, "staff-signin-recovery-codes")
    page.click("#signin-continue")
    page.wait_for_selector("#user-tools")
    assert page.url == f"{live_server.url}/admin/"
    assert "nora" in page.inner_text("#user-tools").lower()
    assert TOTPDevice.objects.get(user__username="nora").confirmed


def test_sign_in_with_password_and_the_current_code(page, live_server):
    create_staff("ada", "admin")
    device = add_authenticator(User.objects.get(username="ada"))
    browser_sign_in(page, live_server.url, "ada", next_path="/admin/merchants/merchant/")
    assert page.url == f"{live_server.url}/admin/merchants/merchant/"
    screenshot(page, "staff-signin-after-code")
    device.refresh_from_db()
    assert device.last_used_at is not None


def test_a_wrong_code_is_refused_and_the_session_is_not_signed_in(page, live_server):
    create_staff("otis", "operator")
    add_authenticator(User.objects.get(username="otis"))
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "otis")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#id_code")
    screenshot(page, "staff-signin-code")
    page.fill("#id_code", "12345x")
    page.click("input[type=submit]")
    assert "not right" in page.inner_text(".errornote")
    page.goto(f"{live_server.url}/admin/payout/payout/")
    assert "/admin/login/" in page.url  # password alone: no admin


def test_a_recovery_code_signs_in_once(page, live_server):
    from apps.common.staff_signin import new_recovery_codes

    create_staff("rosa", "risk-reviewer")
    user = User.objects.get(username="rosa")
    add_authenticator(user)
    code = new_recovery_codes(user)[0]

    def sign_in_with(recovery_code: str) -> None:
        page.context.clear_cookies()
        page.goto(f"{live_server.url}/admin/login/")
        page.fill("#id_username", "rosa")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_selector("#id_code")
        page.fill("#id_code", recovery_code.upper())  # as read out: case does not matter
        page.click("input[type=submit]")
        page.wait_for_load_state()

    sign_in_with(code)
    assert page.url == f"{live_server.url}/admin/"
    assert "recovery code" in page.inner_text("ul.messagelist") and "9 left" in page.inner_text("ul.messagelist")
    screenshot(page, "staff-signin-recovery-code-used")

    sign_in_with(code)  # used up
    assert "/admin/login/code/" in page.url and "not right" in page.inner_text(".errornote")
