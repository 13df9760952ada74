"""A PayMongo channel in the admin: registered like Xendit's (credentials encrypted, a staff request a second person
approves), and checked against PayMongo's receiving institutions when it is configured, so that a bank code of ours
mapped to an institution PayMongo does not list is refused there, not at the first live payout."""

import pytest
from django.contrib.auth.models import User

from apps.channels.models import BankCode, Channel
from apps.common.models import StaffRequest
from tests.support.four_eyes import approve_last_request
from tests.support.staff import admin_login

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, db):
    return admin_login(client, User.objects.create_superuser("root", password="pw"))


def form_data(emulator, **overrides) -> dict:
    data = {"code": "PAYMONGO_PHP_PAYOUT", "name": "PayMongo PHP payouts", "adapter": "paymongo",
            "direction": "payout", "currency": "PHP", "is_active": "on", "priority": "20",
            "api_base_url": emulator.url, "secret_key": emulator.secret_key, "callback_token": emulator.webhook_secret,
            "change_reason": "second PHP upstream, ticket 24"}
    data.update(overrides)
    return data


def test_operator_adds_a_paymongo_channel_checked_against_its_receiving_institutions(admin_client, bootstrapped,
                                                                                     live, paymongo_emulator):
    response = admin_client.post("/admin/channels/channel/add/", form_data(paymongo_emulator))
    assert response.status_code == 302, response.content.decode()[-3000:]
    assert any(path.startswith("/v2/transfers/receiving_institutions") for _, path, _, _ in paymongo_emulator.requests)
    approve_last_request()
    channel = Channel.objects.get(code="PAYMONGO_PHP_PAYOUT")
    assert (channel.adapter, channel.secret_key, channel.callback_token) == (
        "paymongo", paymongo_emulator.secret_key, paymongo_emulator.webhook_secret)
    assert paymongo_emulator.webhook_secret not in channel.callback_token_encrypted
    page = admin_client.get(f"/admin/channels/channel/{channel.pk}/change/").content.decode()
    assert paymongo_emulator.secret_key not in page and f"/channels/paymongo/{channel.code}/webhook" in page


def test_a_bank_code_paymongo_does_not_list_refuses_the_channel_at_configuration(admin_client, bootstrapped, live,
                                                                                paymongo_emulator):
    paymongo_emulator.institutions = {provider: [row for row in rows if row[1] != "SETCPHMMXXX"]
                                      for provider, rows in paymongo_emulator.institutions.items()}
    response = admin_client.post("/admin/channels/channel/add/", form_data(paymongo_emulator))
    page = response.content.decode()
    assert response.status_code == 200 and "SECB" in page and "SETCPHMMXXX" in page
    assert not StaffRequest.objects.exists() and not Channel.objects.filter(code="PAYMONGO_PHP_PAYOUT").exists()
    # a wrong key is refused too, with PayMongo's own answer
    response = admin_client.post("/admin/channels/channel/add/", form_data(paymongo_emulator,
                                                                           secret_key="sk_test_wrong"))
    assert response.status_code == 200 and "could not be asked" in response.content.decode()
    # once the operator deactivates the code PayMongo cannot pay, the channel is accepted
    BankCode.objects.filter(currency_id="PHP", code="SECB").update(is_active=False)
    assert admin_client.post("/admin/channels/channel/add/", form_data(paymongo_emulator)).status_code == 302


def test_without_the_override_the_key_only_ever_goes_to_paymongos_own_root(bootstrapped, live, paymongo_emulator):
    from apps.channels.paymongo import PayMongoClient
    from tests.channels.conftest import paymongo_channel_create

    channel = paymongo_channel_create(code="PAYMONGO_PHP_PAYIN", direction="payin", emulator=paymongo_emulator)
    assert PayMongoClient(channel).base_url == paymongo_emulator.url  # the tests' emulator, override on
    live.CHANNEL_API_BASE_URL_OVERRIDE = False  # production's default
    Channel.objects.filter(pk=channel.pk).update(api_base_url="https://evil.example")
    assert PayMongoClient(Channel.objects.get(pk=channel.pk)).base_url == live.PAYMONGO_API_BASE_URL \
        == "https://api.paymongo.com"
