"""A switched-off merchant (its signed API calls get 1105): its owner can still sign in and look, but changes no key
or callback URL, sends no test callback or re-send, and brings in no one new; each refusal says why and changes
nothing. Taking access away (switching a member off, withdrawing an invite) stays open."""

import pytest
from django.test import Client

from apps.callbacks.models import CallbackAttempt
from apps.common import signing
from apps.common.models import AuditLog
from apps.merchants.models import Merchant, MerchantKey
from apps.portal import developers
from apps.portal.developers import PortalRefused
from apps.portal.models import Invite
from tests.portal.support import portal_login
from tests.portal.team import step_up_code

pytestmark = pytest.mark.django_db

OFF = "Your merchant account is switched off"


def _switch_off(merchant) -> None:
    Merchant.objects.filter(pk=merchant.pk).update(is_active=False)


def _state(merchant) -> tuple:
    fresh = Merchant.objects.get(pk=merchant.pk)
    return (fresh.collection_callback_url, fresh.payout_callback_url,
            list(MerchantKey.objects.filter(merchant=merchant).values_list("version", "revoked_at", "live_from")))


def test_a_switched_off_merchants_owner_cannot_change_keys_or_callback_urls(merchant, team, rsa_keys):
    owner = team["owner"]
    client = portal_login(Client(), owner.user)
    # A second live version first, so that revoking one would otherwise be allowed.
    developers.portal_key_upload(actor=owner, public_key_pem=signing.public_key_to_pem(rsa_keys[2].public_key()),
                                 otp_code=owner.code())
    developers.portal_key_confirm(actor=team["owner2"], key_version=2, otp_code=team["owner2"].code())
    _switch_off(merchant.merchant)
    before, audited = _state(merchant.merchant), AuditLog.objects.count()

    page = client.get("/portal/developers/").content.decode()
    assert 'id="changes-blocked"' in page and OFF in page
    upload = client.post("/portal/developers/keys/", {
        "public_key_text": signing.public_key_to_pem(rsa_keys[1].public_key()), "code": step_up_code(owner.user)})
    assert upload.status_code == 400 and f"{OFF}: you cannot upload keys" in upload.content.decode()
    revoke = client.post("/portal/developers/keys/1/revoke/", {"code": step_up_code(owner.user)}, follow=True)
    assert f"{OFF}: you cannot revoke keys" in revoke.content.decode()
    urls = client.post("/portal/developers/callback-urls/", {
        "collection_callback_url": "https://elsewhere.example/c", "payout_callback_url": "https://elsewhere.example/p",
        "was_collection_callback_url": "", "was_payout_callback_url": "", "code": step_up_code(owner.user)})
    assert urls.status_code == 400 and f"{OFF}: you cannot change callback URLs" in urls.content.decode()
    assert _state(merchant.merchant) == before and AuditLog.objects.count() == audited


def test_a_switched_off_merchants_waiting_key_cannot_be_confirmed(merchant, team, rsa_keys):
    owner = team["owner"]
    developers.portal_key_upload(actor=owner, public_key_pem=signing.public_key_to_pem(rsa_keys[2].public_key()),
                                 otp_code=owner.code())
    _switch_off(merchant.merchant)
    before = _state(merchant.merchant)
    with pytest.raises(PortalRefused, match=f"{OFF}: you cannot confirm keys"):
        developers.portal_key_confirm(actor=team["owner2"], key_version=2, otp_code=team["owner2"].code())
    assert _state(merchant.merchant) == before


def test_a_switched_off_merchant_sends_no_test_callback_and_no_re_send(shops, team):
    merchant = shops[0].merchant
    event = shops[0].event
    _switch_off(merchant)
    attempts = CallbackAttempt.objects.count()
    client = portal_login(Client(), team["owner"].user)
    page = client.post("/portal/developers/test-callback/", {"kind": "payout"})
    assert page.status_code == 400 and f"{OFF}: you cannot send test callbacks" in page.content.decode()
    resend = client.post(f"/portal/callbacks/{event.pk}/resend/", follow=True).content.decode()
    assert f"{OFF}: callbacks cannot be sent again" in resend
    event.refresh_from_db()
    assert CallbackAttempt.objects.count() == attempts and event.status == "dead"
    assert not AuditLog.objects.filter(action__in=["callback.test", "callback.resend"]).exists()


def test_a_switched_off_merchants_owner_brings_in_no_one_but_can_take_access_away(merchant, team):
    _switch_off(merchant.merchant)
    client = portal_login(Client(), team["owner"].user)
    page = client.post("/portal/team/", {"action": "invite", "username": "new@shop.example", "role": "owner"})
    assert f"{OFF}: you cannot invite people or change roles" in page.content.decode()
    assert not Invite.objects.exists()
    client.post("/portal/team/", {"action": "member", "member": team["finance"].pk, "role": "owner"})
    team["finance"].refresh_from_db()
    assert team["finance"].role == "finance"
    client.post("/portal/team/", {"action": "member", "member": team["viewer"].pk, "active": "0"})
    team["viewer"].refresh_from_db()
    assert not team["viewer"].is_active
