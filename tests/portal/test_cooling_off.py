"""The cooling-off after a recovery (docs/portal.md, "Cooling-off"): for PORTAL_RECOVERY_COOLING_HOURS after the
person used their recovery link they change no API key or callback URL, invite nobody and approve no payout; each
page says why and until when, each refusal changes nothing; another owner still can, and so can the person after."""

import pytest
from django.test import Client

from apps.common.models import AuditLog
from apps.payout_batches import services as batches
from apps.payout_batches.models import PayoutBatch
from apps.payout_batches.services import BatchRefused
from apps.merchants.models import Merchant, MerchantKey
from apps.portal.models import Invite
from tests.payout.conftest import fund
from tests.portal.recovery import recovered
from tests.portal.support import portal_login
from tests.portal.team import step_up_code
from tests.portal.test_payout_batches import GOOD

pytestmark = pytest.mark.django_db

PEM_FIELD = "public_key_text"


def _pem(rsa_key) -> str:
    from apps.common import signing

    return signing.public_key_to_pem(rsa_key.public_key())


def _urls(merchant) -> tuple[str, str]:
    fresh = Merchant.objects.get(pk=merchant.pk)
    return fresh.collection_callback_url, fresh.payout_callback_url


def _change_urls(client, person, url="https://attacker.example/cb"):
    return client.post("/portal/developers/callback-urls/", {
        "collection_callback_url": url, "payout_callback_url": url, "was_collection_callback_url": "",
        "was_payout_callback_url": "", "code": step_up_code(person.user)})


def test_a_recovered_owner_cannot_change_keys_or_callback_urls_until_the_cooling_off_ends(
        merchant, team, rsa_keys, django_capture_on_commit_callbacks):
    person = team["owner"]
    recovered(person, django_capture_on_commit_callbacks)
    client = portal_login(Client(), person.user)
    page = client.get("/portal/developers/").content.decode()
    assert 'id="changes-blocked"' in page and "Your access was recovered on" in page and "until" in page
    assert 'id="key-upload-form"' not in page and 'id="callback-urls-form"' not in page

    upload = client.post("/portal/developers/keys/", {PEM_FIELD: _pem(rsa_keys[2]), "code": step_up_code(person.user)})
    assert upload.status_code == 400 and "you cannot upload keys until" in upload.content.decode()
    urls = _change_urls(client, person)
    assert urls.status_code == 400 and "you cannot change callback URLs until" in urls.content.decode()
    revoke = client.post("/portal/developers/keys/1/revoke/", {"code": step_up_code(person.user)}, follow=True)
    assert "you cannot revoke keys until" in revoke.content.decode()
    assert list(MerchantKey.objects.filter(merchant=merchant.merchant).values_list("version", "revoked_at")) == [
        (1, None)]
    assert _urls(merchant.merchant) == ("", "")
    assert not AuditLog.objects.filter(action__in=["merchant_key.add", "merchant.callback_urls"]).exists()

    # Another owner is not held back.
    assert _change_urls(portal_login(Client(), team["owner2"].user), team["owner2"],
                        "https://shop.example/cb").status_code == 302


def test_the_cooling_off_ends_after_the_configured_hours(merchant, team, settings, django_capture_on_commit_callbacks):
    settings.PORTAL_RECOVERY_COOLING_HOURS = 2
    person = team["owner"]
    recovered(person, django_capture_on_commit_callbacks, hours_ago=2.01)
    client = portal_login(Client(), person.user)
    assert 'id="changes-blocked"' not in client.get("/portal/developers/").content.decode()
    assert _change_urls(client, person, "https://shop.example/cb").status_code == 302
    assert _urls(merchant.merchant) == ("https://shop.example/cb", "https://shop.example/cb")


def test_a_recovered_owner_cannot_approve_payouts_during_the_cooling_off(
        merchant, team, django_capture_on_commit_callbacks):
    fund(merchant, 10_000_000)
    person = team["owner"]
    batch = batches.payout_batch_from_csv(actor=team["finance"], file_name="p.csv", data=GOOD).batch
    recovered(person, django_capture_on_commit_callbacks)
    client = portal_login(Client(), person.user)
    page = client.get(f"/portal/payouts/batches/{batch.pk}/").content.decode()
    assert 'id="cooling-off"' in page and "you cannot approve payouts until" in page
    assert 'id="approve-form"' not in page
    response = client.post(f"/portal/payouts/batches/{batch.pk}/approve/", {"code": step_up_code(person.user)},
                           follow=True)
    assert "you cannot approve payouts until" in response.content.decode()
    with pytest.raises(BatchRefused, match="you cannot approve payouts until"):
        batches.payout_batch_approve(actor=person, batch_id=batch.pk, otp_code=person.code())
    batch.refresh_from_db()
    assert batch.status == PayoutBatch.Status.PENDING and batch.decided_by_id is None
    # Another owner approves it.
    batches.payout_batch_approve(actor=team["owner2"], batch_id=batch.pk, otp_code=team["owner2"].code())
    batch.refresh_from_db()
    assert batch.status == PayoutBatch.Status.APPROVED


def test_a_recovered_owner_cannot_invite_people_or_grant_roles_during_the_cooling_off(
        merchant, team, django_capture_on_commit_callbacks):
    person = team["owner"]
    recovered(person, django_capture_on_commit_callbacks)
    client = portal_login(Client(), person.user)
    page = client.post("/portal/team/", {"action": "invite", "username": "accomplice@evil.example",
                                         "role": "owner"}).content.decode()
    assert "you cannot invite people or change roles until" in page
    assert not Invite.objects.filter(username="accomplice@evil.example").exists()
    page = client.post("/portal/team/", {"action": "member", "member": team["finance"].pk, "role": "owner"},
                       follow=True).content.decode()
    assert "you cannot invite people or change roles until" in page
    team["finance"].refresh_from_db()
    assert team["finance"].role == "finance"
    # Nor approving another owner's owner invite.
    from apps.portal.services import invite_create

    waiting = invite_create(merchant=merchant.merchant, username="new-owner@shop.example", role="owner",
                            actor=team["owner2"].user).invite
    assert waiting.needs_approval
    page = client.post("/portal/team/", {"action": "approve-invite", "invite": waiting.pk,
                                         "code": step_up_code(person.user)}).content.decode()
    assert "you cannot invite people or change roles until" in page
    waiting.refresh_from_db()
    assert waiting.approved_at is None
    # Taking access away stays open.
    client.post("/portal/team/", {"action": "member", "member": team["viewer"].pk, "active": "0"})
    team["viewer"].refresh_from_db()
    assert not team["viewer"].is_active
    # Switching them back on gives access: refused.
    page = client.post("/portal/team/", {"action": "member", "member": team["viewer"].pk, "active": "1"},
                       follow=True).content.decode()
    assert "you cannot invite people or change roles until" in page
    team["viewer"].refresh_from_db()
    assert not team["viewer"].is_active
