"""One person never in two seats, in a real browser at 1280 px (docs/staff-access.md, "Independence"): a superuser
signed in with a code opens a merchant owner's password page and gets the staff list with the reason; a second
superuser account the first made cannot give a large payout's second approval (screenshots kept)."""

import pytest
from django.contrib.auth.models import User
from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.payout.models import Payout
from tests.helpers import screenshot
from tests.payout.conftest import fund, new_payout
from tests.portal.support import portal_user
from tests.support.browser import chromium
from tests.support.staff import PASSWORD, add_authenticator, browser_sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def new_page(browser):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(15_000)
    return page


def test_a_merchant_owners_password_page_answers_with_the_reason(live_server, merchant):
    owner = portal_user(merchant, "owner")
    add_authenticator(User.objects.create_superuser("ada", password=PASSWORD))
    with chromium() as browser:
        page = new_page(browser)
        browser_sign_in(page, live_server.url, "ada", next_path=f"/admin/auth/user/{owner.pk}/password/")
        page.wait_for_selector("ul.messagelist")
        said = page.inner_text("ul.messagelist")
        assert "is a merchant's portal user, not a staff account" in said and "docs/staff-access.md" in said
        assert page.url.endswith("/admin/auth/user/") and owner.username not in page.inner_text("#content")
        screenshot(page, "independence-merchant-user-refused")
        page.goto(f"{live_server.url}/admin/otp_totp/totpdevice/{TOTPDevice.objects.get(user=owner).pk}/delete/")
        assert "belongs to a merchant's portal user" in page.inner_text("ul.messagelist")
    assert TOTPDevice.objects.filter(user=owner, confirmed=True).exists()
    assert User.objects.get(pk=owner.pk).check_password(PASSWORD)


def test_a_second_superuser_made_by_the_first_is_refused_the_second_approval(live_server, merchant):
    fund(merchant, 100_000_000)
    payout = new_payout(merchant, amount=50_000_000)
    add_authenticator(User.objects.create_superuser("ada", password=PASSWORD))
    decide = f"/admin/payout/payoutreviewqueue/{payout.pk}/decide/"
    with chromium() as browser:
        page = new_page(browser)
        browser_sign_in(page, live_server.url, "ada", next_path="/admin/auth/user/add/")
        page.fill("#id_username", "ada2")
        page.fill("#id_password1", PASSWORD)
        page.fill("#id_password2", PASSWORD)
        page.click("input[name=_save]")
        page.wait_for_selector("#id_is_superuser")
        page.check("#id_is_superuser")
        page.click("input[name=_save]")
        page.wait_for_selector("ul.messagelist")
        page.goto(f"{live_server.url}{decide}")
        page.fill("#id_reason", "payee verified by phone")
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("#approve-button")
        page.wait_for_selector("ul.messagelist")
        assert "a second reviewer must approve it" in page.inner_text("ul.messagelist")

        add_authenticator(User.objects.get(username="ada2"))
        page = new_page(browser)
        browser_sign_in(page, live_server.url, "ada2", next_path=decide)
        page.fill("#id_reason", "looks fine")
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("#approve-button")
        page.wait_for_selector("ul.messagelist")
        said = page.inner_text("ul.messagelist")
        assert "ada and ada2 are not independent: ada created or changed the account of ada2" in said
        screenshot(page, "independence-second-approval-refused")
    payout.refresh_from_db()
    assert payout.status == Payout.Status.FROZEN and payout.approvals.count() == 1
