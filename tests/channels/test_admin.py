"""Channels in the admin: editable through a change request a second person approves (four eyes), with
upstream credentials write-only (encrypted at rest, never shown again)."""

import pytest
from django.contrib.auth.models import User

from apps.channels.models import Channel
from apps.common.models import AuditLog
from tests.support.four_eyes import approve_last_request
from tests.support.staff import admin_login

pytestmark = pytest.mark.django_db

SECRET = "xnd_production_SuperSecretValue123"
TOKEN = "callback-token-VerySecret456"


@pytest.fixture
def admin_client(client, db):
    return admin_login(client, User.objects.create_superuser("root", password="pw"))


@pytest.fixture
def xendit(xendit_emulator, live):
    """Xendit (the emulator) knows our secret key and is the deployment's API root: configuring a payout channel
    asks it for its payout channels (GET /payouts_channels)."""
    xendit_emulator.secret_key = SECRET
    live.XENDIT_API_BASE_URL = xendit_emulator.url
    return xendit_emulator


def form_data(**overrides) -> dict:
    data = {"code": "XENDIT_PHP_PAYOUT", "name": "Xendit PHP payouts", "adapter": "xendit", "direction": "payout",
            "currency": "PHP", "is_active": "on", "priority": "10", "weight": "100", "bank_codes": "[]",
            "api_base_url": "", "secret_key": SECRET,
            "callback_token": TOKEN, "change_reason": "new upstream account, ticket 42"}
    data.update(overrides)
    return data


def test_operator_adds_a_xendit_channel_and_never_sees_its_credentials_again(admin_client, bootstrapped, live, xendit):
    response = admin_client.post("/admin/channels/channel/add/", form_data())
    assert response.status_code == 302, response.content.decode()[-3000:]
    assert not Channel.objects.filter(code="XENDIT_PHP_PAYOUT").exists()  # asked for, not yet there
    approve_last_request()
    channel = Channel.objects.get(code="XENDIT_PHP_PAYOUT")
    assert (channel.secret_key, channel.callback_token) == (SECRET, TOKEN)
    assert SECRET not in channel.secret_key_encrypted and TOKEN not in channel.callback_token_encrypted
    page = admin_client.get(f"/admin/channels/channel/{channel.pk}/change/").content.decode()
    assert SECRET not in page and TOKEN not in page and channel.secret_key_encrypted not in page
    assert "secret key set, callback token set" in page
    assert f"/channels/xendit/{channel.code}/webhook" in page
    listing = admin_client.get("/admin/channels/channel/").content.decode()
    assert SECRET not in listing and "XENDIT_PHP_PAYOUT" in listing
    audit_row = AuditLog.objects.get(action="channel.create", object_id=str(channel.pk))
    assert audit_row.new["secret key"] == "replaced" and SECRET not in str(audit_row.new)

    # Saved again with the credential fields empty: the stored ones are kept.
    response = admin_client.post(f"/admin/channels/channel/{channel.pk}/change/",
                                 form_data(secret_key="", callback_token="", priority="5"))
    assert response.status_code == 302
    approve_last_request()
    channel.refresh_from_db()
    assert (channel.priority, channel.secret_key, channel.callback_token) == (5, SECRET, TOKEN)
    # A new key replaces the old (Xendit knows it: the channel list is read with it); "clear" removes both.
    xendit.secret_key = "xnd_rotated"
    admin_client.post(f"/admin/channels/channel/{channel.pk}/change/", form_data(secret_key="xnd_rotated",
                                                                                   callback_token=""))
    approve_last_request()
    channel.refresh_from_db()
    assert (channel.secret_key, channel.callback_token) == ("xnd_rotated", TOKEN)
    admin_client.post(f"/admin/channels/channel/{channel.pk}/change/",
                      form_data(secret_key="", callback_token="", clear_credentials="on"))
    approve_last_request()
    channel.refresh_from_db()
    assert (channel.secret_key_encrypted, channel.callback_token_encrypted) == ("", "")


def test_admin_refuses_a_sandbox_channel_in_a_live_deployment(admin_client, bootstrapped, live):
    response = admin_client.post("/admin/channels/channel/add/", form_data(code="SANDBOX_AGAIN", adapter="sandbox"))
    assert response.status_code == 200 and "PLATFORM_ENVIRONMENT" in response.content.decode()
    assert not Channel.objects.filter(code="SANDBOX_AGAIN").exists()


def test_bank_codes_are_listed(admin_client, bootstrapped):
    page = admin_client.get("/admin/channels/bankcode/?currency__code__exact=PHP").content.decode()
    assert "GCASH" in page


def test_credentials_stay_out_of_the_settings_trail(admin_client, bootstrapped, live, xendit):
    from django.apps import apps

    admin_client.post("/admin/channels/channel/add/", form_data())
    approve_last_request()
    event_model = apps.get_model("channels", "ChannelEvent")
    fields = {f.name for f in event_model._meta.get_fields()}
    assert "api_base_url" in fields and not fields & {"secret_key_encrypted", "callback_token_encrypted"}
    assert event_model.objects.filter(code="XENDIT_PHP_PAYOUT").exists()  # the channel itself is tracked


def test_production_refuses_a_channel_api_root_and_its_key_goes_only_to_xendit(admin_client, bootstrapped, live,
                                                                              xendit):
    # An admin who may edit channels must not be able to send the stored secret key (and the webhooks' re-reads,
    # which decide what money moves) to a host of their choosing.
    live.CHANNEL_API_BASE_URL_OVERRIDE = False  # production's default
    response = admin_client.post("/admin/channels/channel/add/", form_data(api_base_url="https://evil.example"))
    assert response.status_code == 200 and "api_base_url" in response.context["adminform"].form.errors
    assert not Channel.objects.filter(code="XENDIT_PHP_PAYOUT").exists()
    # A row changed behind the admin's back (shell, SQL) is not honoured either.
    assert admin_client.post("/admin/channels/channel/add/", form_data()).status_code == 302
    approve_last_request()
    Channel.objects.filter(code="XENDIT_PHP_PAYOUT").update(api_base_url="https://evil.example")
    from apps.channels.xendit import XenditClient

    assert XenditClient(Channel.objects.get(code="XENDIT_PHP_PAYOUT")).base_url == live.XENDIT_API_BASE_URL


def test_live_operator_can_deactivate_a_leftover_sandbox_channel_but_not_activate_it(admin_client, bootstrapped,
                                                                                    live):
    channel = Channel.objects.get(code="SANDBOX_PHP_PAYIN")  # bootstrapped in sandbox, then the deployment went live
    data = {"code": channel.code, "name": channel.name, "adapter": "sandbox", "direction": "payin", "currency": "PHP",
            "priority": "100", "api_base_url": "", "change_reason": "leftover sandbox route"}
    response = admin_client.post(f"/admin/channels/channel/{channel.pk}/change/", data)  # is_active unticked
    assert response.status_code == 302, response.content.decode()[-2000:]
    approve_last_request()
    channel.refresh_from_db()
    assert channel.is_active is False
    response = admin_client.post(f"/admin/channels/channel/{channel.pk}/change/", {**data, "is_active": "on"})
    assert response.status_code == 200 and "adapter" in response.context["adminform"].form.errors
    channel.refresh_from_db()
    assert channel.is_active is False


def test_operators_see_each_channels_health_and_todays_volume(admin_client, client, bootstrapped, rsa_keys):
    from django.utils import timezone

    from apps.channels.models import ChannelHealth
    from apps.payout.models import Payout
    from tests.conftest import make_merchant
    from tests.payout.conftest import create_ok, fund

    shop = make_merchant(rsa_keys[2], name="Volume Shop")
    fund(shop, 10_000_000)
    payouts = [create_ok(client, shop, payee_account=f"091700000{i}") for i in range(4)]
    Payout.objects.filter(pk__in=[p.pk for p in payouts[:3]]).update(status=Payout.Status.SUCCESS)
    Payout.objects.filter(pk=payouts[3].pk).update(status=Payout.Status.FAILED)
    channel = Channel.objects.get(code="SANDBOX_PHP_PAYOUT")
    ChannelHealth.objects.create(channel=channel, state=ChannelHealth.State.OPEN, opened_at=timezone.now(),
                                 reason="5 failures in 60 s, last: HTTP 503")
    listing = admin_client.get("/admin/channels/channel/?q=SANDBOX_PHP").content.decode()
    assert "open since" in listing and "5 failures in 60 s, last: HTTP 503" in listing
    assert "75% (3 of 4)" in listing
    page = admin_client.get(f"/admin/channels/channel/{channel.pk}/change/").content.decode()
    assert "Orders today" in page and "is_draining" in page
    ChannelHealth.objects.filter(channel=channel).update(
        opened_at=timezone.now() - timezone.timedelta(seconds=3600))
    assert "half-open, probing since" in admin_client.get("/admin/channels/channel/?q=SANDBOX_PHP").content.decode()
