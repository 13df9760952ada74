"""The developers page and payouts by hand in a real browser (Debian chromium through Playwright, against
live_server): people sign in with a password and a TOTP code computed from their authenticator's key; the owner adds
and revokes a key, sets the callback URL and sends a test callback to a real receiver; finance uploads a CSV; another
owner approves it from the home page's "waiting for you". Screenshots at 1280 and 390 px (var/screenshots/)."""

import pytest

from apps.common import signing
from apps.payout_batches.models import PayoutBatch
from apps.merchants.models import MerchantKey
from apps.merchants.selectors import public_key_object
from apps.payout.models import Payout
from tests.helpers import screenshot
from tests.payout.conftest import fund
from tests.portal.support import browser_sign_in
from tests.portal.team import member, step_up_code
from tests.portal.test_payout_batches import GOOD
from tests.support.browser import chromium

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def shots(page, name: str) -> None:
    """The page at 1280 px, then at 390 px (a phone), then back. At 390 px nothing may need a sideways scroll of the
    page itself (tables scroll inside their own box)."""
    screenshot(page, f"{name}-1280")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, f"{name} scrolls sideways at 390 px"
    screenshot(page, f"{name}-390")
    page.set_viewport_size({"width": 1280, "height": 900})


def test_developers_and_payouts_by_hand_in_a_browser(live_server, bootstrapped, rsa_keys, callback_receiver, tmp_path):
    from tests.conftest import make_merchant

    ctx = make_merchant(rsa_keys[0], name="Sari-Sari Online")
    fund(ctx, 10_000_000)
    owner, owner2, finance = (member(ctx.merchant, "owner"), member(ctx.merchant, "owner", "ana@sari.example"),
                              member(ctx.merchant, "finance"))
    base = live_server.url
    with chromium() as browser:
        # --- the owner: keys, callback URL, test callback ----------------------------------------------------------
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.set_default_timeout(20_000)
        browser_sign_in(page, base, owner.user.username)
        page.click("#portal-nav >> text=Developers")
        page.wait_for_selector("#key-table")
        pem = signing.public_key_to_pem(rsa_keys[2].public_key())
        page.fill("#id_public_key_text", pem)
        # Each change asks for the code the app shows at that moment; the test lets the clock "move on" a step.
        page.fill("#key-upload-form #id_code", step_up_code(owner.user))
        page.click("#key-upload-form button[type=submit]")
        page.wait_for_selector("text=Key version 2 added")
        assert MerchantKey.objects.filter(merchant=ctx.merchant, revoked_at__isnull=True).count() == 2
        # The new version waits for a second owner (test_recovery_browser confirms one on the page); then the old
        # one can go.
        from apps.portal.developers import portal_key_confirm

        portal_key_confirm(actor=owner2, key_version=2, otp_code=step_up_code(owner2.user))
        page.reload()
        page.fill("tr[data-version='1'] input[name=code]", step_up_code(owner.user))
        page.click("tr[data-version='1'] button")
        page.wait_for_selector("text=Key version 1 is revoked")
        page.fill("#id_payout_callback_url", callback_receiver.url)
        page.fill("#id_collection_callback_url", callback_receiver.url)
        page.fill("#callback-urls-form #id_code", step_up_code(owner.user))
        page.click("#callback-urls-form button[type=submit]")
        page.wait_for_selector("text=Callback URLs saved")
        page.click("#test-callback-form button[value=payout]")
        page.wait_for_selector("#test-callback-result")
        assert "Delivered" in page.inner_text("#test-callback-result")
        assert page.inner_text("#test-http-status") == "200"
        [received] = callback_receiver.wait_for(1)
        with page.expect_download() as download:
            page.click("#platform-keys-json")
        import json
        keys = {k["key_version"]: k["public_key"] for k in json.loads(open(download.value.path()).read())["keys"]}
        assert signing.verify(public_key_object(keys[received.body["key_version"]]), received.body,
                              received.body["sign"])
        shots(page, "portal-developers")

        # --- finance: a CSV batch ----------------------------------------------------------------------------------
        fpage = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        fpage.set_default_timeout(20_000)
        browser_sign_in(fpage, base, finance.user.username)
        fpage.click("#portal-nav >> text=Send payouts")
        fpage.click("#new-payouts")
        shots(fpage, "portal-payouts-new")
        bad = tmp_path / "bad.csv"
        bad.write_bytes(GOOD.replace(b"hand-3,5000,PHP,Jose Rizal,1234567890,BPI",
                                     b"hand-3,50.00,PHP,Jose Rizal,1234567890,NOPE"))
        fpage.set_input_files("#upload-form input[type=file]", str(bad))
        fpage.click("#upload-form button[type=submit]")
        fpage.wait_for_selector("#row-errors")
        assert "1000" in fpage.inner_text("#row-errors tr[data-line='4']")
        shots(fpage, "portal-payouts-errors")
        good = tmp_path / "salaries.csv"
        good.write_bytes(GOOD)
        fpage.set_input_files("#upload-form input[type=file]", str(good))
        fpage.click("#upload-form button[type=submit]")
        fpage.wait_for_selector("#batch-status")
        assert "Waiting for the owner" in fpage.inner_text("#batch-status")
        assert fpage.locator("#approve-form").count() == 0
        batch = PayoutBatch.objects.get()

        # --- a second owner approves from home -----------------------------------------------------------------------
        opage = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        opage.set_default_timeout(20_000)
        browser_sign_in(opage, base, owner2.user.username)
        assert "Payout batches waiting for your approval" in opage.inner_text("#waiting")
        screenshot(opage, "portal-home-waiting-1280")
        opage.click("#waiting a")
        opage.click(f"tr[data-batch='{batch.pk}'] a")
        opage.wait_for_selector("#approve-form")
        shots(opage, "portal-batch-pending")
        opage.fill("#approve-form #id_code", step_up_code(owner2.user))
        opage.click("#approve-form button[type=submit]")
        opage.wait_for_selector("text=Approved: 3 payouts created")
        assert Payout.objects.filter(merchant=ctx.merchant).count() == 3
        assert "3 created, 0 not created" in opage.inner_text("#batch-result")
        shots(opage, "portal-batch-done")
