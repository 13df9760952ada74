"""A Xendit payout channel is checked against Xendit's own payout channel list (GET /payouts_channels) when it is
configured: an active bank code whose Xendit channel code Xendit does not list is refused in the
admin when the change is asked for, and again when a second person approves it, never at the first live payout.
What does not change the upstream's configuration (priority, deactivation) never asks Xendit, so a channel can be
taken out of service while Xendit is down."""

import pytest
from django.contrib.auth.models import User

from apps.channels.models import BankCode, Channel
from apps.channels.services import channel_upstream_check
from apps.common.models import StaffRequest
from apps.common.staff_requests import StaffRequestRefused
from tests.support.four_eyes import approve_last_request
from tests.support.staff import admin_login

pytestmark = pytest.mark.django_db

ADD = "/admin/channels/channel/add/"


@pytest.fixture
def admin_client(client, db):
    return admin_login(client, User.objects.create_superuser("root", password="pw"))


def form(emulator, **overrides) -> dict:
    data = {"code": "XENDIT_PHP_PAYOUT", "name": "Xendit PHP payouts", "adapter": "xendit", "direction": "payout",
            "currency": "PHP", "is_active": "on", "priority": "10", "api_base_url": emulator.url,
            "secret_key": emulator.secret_key, "callback_token": "token", "change_reason": "new upstream, ticket 7"}
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def channel_list_asks(emulator) -> int:
    return sum(1 for method, path, *_ in emulator.requests if path.startswith("/payouts_channels"))


def drop(emulator, *codes: str) -> None:
    """Xendit stops listing these channel codes (a bank left InstaPay, a code was renamed)."""
    emulator.payout_channels = [c for c in emulator.payout_channels if c["channel_code"] not in codes]


def test_our_bank_codes_all_map_to_channels_xendit_lists_and_the_channel_is_configured(admin_client, bootstrapped,
                                                                                       live, xendit_emulator):
    response = admin_client.post(ADD, form(xendit_emulator))
    assert response.status_code == 302, response.content.decode()[-2000:]
    approve_last_request()
    assert Channel.objects.get(code="XENDIT_PHP_PAYOUT").is_active
    assert channel_list_asks(xendit_emulator) == 2  # when asked for, and again at approval
    [(_, path, _, _)] = [r for r in xendit_emulator.requests if r[1].startswith("/payouts_channels")][:1]
    assert path == "/payouts_channels?currency=PHP"


def test_a_channel_code_xendit_does_not_list_is_refused_when_asked_for(admin_client, bootstrapped, live,
                                                                      xendit_emulator):
    drop(xendit_emulator, "PH_SEC", "PH_PAYMAYA")
    response = admin_client.post(ADD, form(xendit_emulator))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Xendit does not list these channel codes for PHP payouts" in page
    assert "MAYA \u2192 PH_PAYMAYA, SECB \u2192 PH_SEC" in page and "PAYOUT_CHANNEL_CODES" in page
    assert not StaffRequest.objects.exists() and not Channel.objects.filter(code="XENDIT_PHP_PAYOUT").exists()


def test_a_channel_code_xendit_stopped_listing_is_refused_at_approval(admin_client, bootstrapped, live,
                                                                     xendit_emulator):
    assert admin_client.post(ADD, form(xendit_emulator)).status_code == 302
    drop(xendit_emulator, "PH_MET")  # between the request and its approval
    with pytest.raises(StaffRequestRefused, match="MBTC \u2192 PH_MET"):
        approve_last_request()
    assert not Channel.objects.filter(code="XENDIT_PHP_PAYOUT").exists()
    assert StaffRequest.objects.get().status == StaffRequest.Status.PENDING
    # Deactivating the bank code Xendit no longer serves is the other way out: then the channel is configured.
    BankCode.objects.filter(currency_id="PHP", code="MBTC").update(is_active=False)
    approve_last_request()
    assert Channel.objects.filter(code="XENDIT_PHP_PAYOUT", is_active=True).exists()


@pytest.mark.parametrize("upstream", ["down", "wrong key"])
def test_xendit_not_answering_refuses_the_configuration_with_the_reason(upstream, admin_client, bootstrapped, live,
                                                                        xendit_emulator):
    if upstream == "down":
        xendit_emulator.stop()
        reason = "ConnectionError"
    else:
        xendit_emulator.secret_key = "xnd_the_real_one"
        reason = "HTTP 401"
    response = admin_client.post(ADD, form(xendit_emulator, secret_key="xnd_typed_wrong"))
    assert response.status_code == 200
    page = response.content.decode()
    assert "payout channel list could not be read" in page and reason in page
    assert not StaffRequest.objects.exists()


def test_priority_and_deactivation_never_ask_xendit_but_reactivation_does(admin_client, bootstrapped, live,
                                                                         xendit_channels, xendit_emulator):
    channel = xendit_channels["payout"]
    xendit_emulator.stop()  # Xendit is down: the operator takes its channel down a notch, then out of service
    url = f"/admin/channels/channel/{channel.pk}/change/"
    data = form(xendit_emulator, code=channel.code, api_base_url=channel.api_base_url, secret_key="",
                callback_token="", priority="50")
    assert admin_client.post(url, data).status_code == 302
    approve_last_request()
    assert admin_client.post(url, form(xendit_emulator, **{**data, "is_active": None})).status_code == 302
    approve_last_request()
    channel.refresh_from_db()
    assert (channel.priority, channel.is_active) == (50, False)
    assert channel_list_asks(xendit_emulator) == 0
    # Activating it again is a configuration Xendit must confirm: refused while it does not answer.
    response = admin_client.post(url, data)
    assert response.status_code == 200 and "payout channel list could not be read" in response.content.decode()


def test_a_payin_channel_and_a_keyless_channel_are_not_asked(bootstrapped, live, xendit_channels, xendit_emulator):
    drop(xendit_emulator, *[c["channel_code"] for c in xendit_emulator.payout_channels])
    channel_upstream_check(channel=xendit_channels["payin"])  # invoices: no payout channel codes to check
    keyless = Channel(code="XENDIT_KEYLESS", name="x", adapter="xendit", direction="payout", currency_id="PHP",
                      api_base_url=xendit_emulator.url)
    keyless.full_clean()  # cannot pay anything out (every call 401, retried): nothing to ask
    assert channel_list_asks(xendit_emulator) == 0
    with pytest.raises(Exception, match="Xendit does not list"):
        channel_upstream_check(channel=xendit_channels["payout"])
