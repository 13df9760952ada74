"""Access recovery and key confirmation in a real browser (Debian chromium through Playwright, against live_server):
one staff member asks on the admin's merchant users page, a second approves on the staff requests page, the person
opens the e-mailed link on a phone, sets a password, signs in and enrols a new authenticator, and sees the
cooling-off; the other owner sees the notice and dismisses it, and confirms a waiting key version on the developers
page. Screenshots: the admin at 1280 px, the portal at 390 px (and the developers page at 1280)."""

import pytest
from django.contrib.auth import get_user_model
from django.core import mail

from apps.common import signing
from apps.common.models import AccountAct, StaffRequest
from apps.merchants.models import MerchantKey
from apps.portal import developers
from apps.portal.models import Notice
from tests.helpers import screenshot
from tests.portal.recovery import NEW_PASSWORD, link_token
from tests.portal.support import browser_sign_in as portal_sign_in
from tests.portal.team import member, step_up_code
from tests.support.browser import chromium
from tests.support.four_eyes import staff_account
from tests.support.staff import add_authenticator, browser_sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


def _fits(page, name: str) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"], \
        f"{name} scrolls sideways"
    screenshot(page, name)


def _staff_page(browser, live_server, username: str, next_path: str):
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.set_default_timeout(20_000)
    add_authenticator(get_user_model().objects.get(username=username))
    browser_sign_in(page, live_server.url, username, next_path=next_path)
    return page


def test_a_lost_authenticator_is_recovered_by_two_staff_in_a_browser(live_server, merchant, rsa_keys):
    from tests.common.test_staff_signin_browser import code_from_secret

    person, other = member(merchant.merchant, "owner"), member(merchant.merchant, "owner", "ana@shop.example")
    third = member(merchant.merchant, "owner", "cruz@shop.example")
    staff_account("desk-ana")
    staff_account("desk-ben")
    base = live_server.url
    with chromium() as browser:
        # --- staff: one asks, another approves ---------------------------------------------------------------------
        asker = _staff_page(browser, live_server, "desk-ana", "/admin/portal/merchantuser/")
        asker.wait_for_selector("#result_list")
        _fits(asker, "admin-merchant-users-1280")
        asker.check(f"input[name=_selected_action][value='{person.pk}']")
        asker.select_option("select[name=action]", "ask_recovery")
        asker.click("button[name=index]")
        asker.wait_for_selector("#recovery-people")
        assert person.user.email in asker.inner_text("#recovery-people")
        asker.fill("textarea[name=reason]", "lost phone; called back on the number on file")
        _fits(asker, "admin-recovery-ask-1280")
        asker.click("input[type=submit][value='Ask for recovery']")
        asker.wait_for_selector("ul.messagelist")
        assert "second person approves it" in asker.inner_text("ul.messagelist")
        _fits(asker, "admin-recovery-requested-1280")

        approver = _staff_page(browser, live_server, "desk-ben", "/admin/common/staffrequest/")
        approver.check("#action-toggle")
        approver.select_option("select[name=action]", "approve_selected")
        approver.click("button[name=index]")
        assert "Recover the portal access of" in approver.content()
        approver.fill("textarea[name=reason]", "call-back record checked")
        approver.click("input[type=submit][value=Approve]")
        approver.wait_for_selector("ul.messagelist")
        assert "approved" in approver.inner_text("ul.messagelist")
        _fits(approver, "admin-recovery-approved-1280")
        assert StaffRequest.objects.get().status == StaffRequest.Status.APPROVED
        assert AccountAct.objects.filter(act=AccountAct.Act.ACCESS_RESET).count() == 2

        # --- the person, on a phone: the e-mailed link, a new password, a new authenticator ------------------------
        token = link_token(person.user.email)
        phone = browser.new_context(viewport=PHONE).new_page()
        phone.set_default_timeout(20_000)
        phone.goto(f"{base}/portal/recover/{token}/")
        assert phone.inner_text("#recover-username") == person.user.username
        _fits(phone, "portal-recover-390")
        phone.fill("#id_password1", NEW_PASSWORD)
        phone.fill("#id_password2", NEW_PASSWORD)
        phone.click("#recover-form button[type=submit]")
        phone.wait_for_selector("#signin-form")
        phone.fill("#id_username", person.user.username)
        phone.fill("#id_password", NEW_PASSWORD)
        phone.click("#signin-form button[type=submit]")
        phone.wait_for_selector("#signin-qr svg")
        phone.fill("#id_code", code_from_secret(phone.inner_text("#signin-secret")))
        phone.click("#code-form button[type=submit]")
        phone.wait_for_selector("#recovery-codes")
        phone.click("#signin-continue")
        phone.wait_for_selector("#cooling-off")
        assert "you cannot change API keys or callback URLs" in phone.inner_text("#cooling-off")
        _fits(phone, "portal-cooling-off-home-390")
        phone.goto(f"{base}/portal/developers/")
        assert "you cannot change API keys or callback URLs until" in phone.inner_text("#changes-blocked")
        assert phone.locator("#key-upload-form").count() == 0
        _fits(phone, "portal-cooling-off-developers-390")
        phone.goto(f"{base}/portal/recover/{token}/")
        assert phone.locator("#recover-invalid").count() == 1

        # --- another owner: the notice, and a key version waiting for them --------------------------------------
        developers.portal_key_upload(actor=third, otp_code=step_up_code(third.user),
                                     public_key_pem=signing.public_key_to_pem(rsa_keys[2].public_key()))
        owner_phone = browser.new_context(viewport=PHONE).new_page()
        owner_phone.set_default_timeout(20_000)
        portal_sign_in(owner_phone, base, other.user.username)
        owner_phone.wait_for_selector("#notices")
        notices = owner_phone.inner_text("#notices")
        assert f"Access of {person.user.username} recovered" in notices and "waits to go live" in notices
        _fits(owner_phone, "portal-notices-390")
        owner_phone.click(f"[data-notice='{Notice.objects.get(merchant_user=other, subject__startswith='Access').pk}'] "
                          "button")
        owner_phone.wait_for_selector("#balances")
        assert "recovered" not in owner_phone.inner_text("#main")
        owner_phone.goto(f"{base}/portal/developers/")
        owner_phone.wait_for_selector(".key-waiting")
        _fits(owner_phone, "portal-key-waiting-390")
        owner_phone.set_viewport_size({"width": 1280, "height": 900})
        screenshot(owner_phone, "portal-key-waiting-1280")
        owner_phone.fill("tr[data-version='2'] .confirm-form input[name=code]", step_up_code(other.user))
        owner_phone.click("tr[data-version='2'] .confirm-form button")
        owner_phone.wait_for_selector("text=Key version 2 is live")
        assert MerchantKey.objects.get(merchant=merchant.merchant, version=2).live_from is not None
    assert {message.to[0] for message in mail.outbox} >= {person.user.email, other.user.email}
