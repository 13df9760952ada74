"""Four eyes on a channel's credentials in a real browser: one channel manager types a new secret key and
callback token and saves; that only asks for the change; they cannot approve it themselves; a second channel
manager approves it and only then does the channel use the new credentials. Neither page shows a secret.
Screenshots at 1280 px kept (var/screenshots/)."""

import pytest
from django.contrib.auth.models import Permission

from apps.channels.models import Channel
from apps.channels.services import channel_credentials_set
from apps.common.models import StaffRequest
from tests.common.test_staff_requests_browser import REQUESTS, approve_all, assert_requests_table_fits, log_in
from tests.helpers import screenshot
from tests.support.browser import chromium
from tests.support.four_eyes import staff_account

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NEW_SECRET, NEW_TOKEN = "xnd_production_RotatedKey2027abc", "rotated-callback-token-2027"


def channel_manager(username: str):
    user = staff_account(username, superuser=False)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="channels",
                                                         codename__in=["change_channel", "view_channel"]))
    return user


def test_a_channel_credential_change_needs_a_second_channel_manager(live_server, bootstrapped, settings):
    settings.PLATFORM_ENVIRONMENT = "live"
    channel = Channel.objects.create(code="XENDIT_PHP_PAYIN", name="Xendit PHP pay-in", adapter="xendit",
                                     direction="payin", currency_id="PHP")
    channel_credentials_set(channel=channel, secret_key="xnd_production_Current1", callback_token="current-token")
    channel_manager("chandra")
    channel_manager("chen")
    with chromium() as browser:
        page = log_in(browser, live_server, "chandra", f"/admin/channels/channel/{channel.pk}/change/")
        page.fill("#id_secret_key", NEW_SECRET)
        page.fill("#id_callback_token", NEW_TOKEN)
        page.fill("#id_change_reason", "yearly key rotation, ticket 2027-01")
        screenshot(page, "channel-change-form")
        page.click("input[name=_save]")
        page.wait_for_selector("ul.messagelist")
        message = page.inner_text("ul.messagelist")
        assert "second person" in message and "secret key replaced" in message
        assert NEW_SECRET not in page.content() and NEW_TOKEN not in page.content()
        screenshot(page, "channel-change-requested")
        channel.refresh_from_db()
        assert channel.secret_key == "xnd_production_Current1"

        page.goto(f"{live_server.url}{REQUESTS}")
        approve_all(page, "approving my own")
        assert "a second person must decide it" in page.inner_text("ul.messagelist")

        page = log_in(browser, live_server, "chen", REQUESTS)
        assert "secret key replaced" in page.inner_text("#changelist")
        screenshot(page, "channel-change-pending")
        approve_all(page, "rotation announced by Xendit, checked")
        assert "approved" in page.inner_text("ul.messagelist").lower()
        assert NEW_SECRET not in page.content() and NEW_TOKEN not in page.content()
        screenshot(page, "channel-change-approved")
        assert_requests_table_fits(page)
    request = StaffRequest.objects.get()
    assert (request.status, request.requested_by.username, request.decided_by.username) == ("APPROVED", "chandra",
                                                                                           "chen")
    channel.refresh_from_db()
    assert (channel.secret_key, channel.callback_token) == (NEW_SECRET, NEW_TOKEN)
