"""Key versions uploaded in the portal (docs/portal.md, "Key confirmation"): live once a second owner, independent of
the uploader, confirms them, or after PORTAL_KEY_WAIT_HOURS; until then the merchant's current version keeps
verifying and the new one gets 1104 (real signed API calls), the other owners are told and any of them can revoke
it. Through the real pages."""

import dataclasses
from datetime import timedelta

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from apps.common import signing
from apps.common.independence import account_act_record
from apps.common.models import AccountAct, AuditLog
from apps.merchants.models import MerchantKey
from apps.portal.models import KeyUpload, Notice
from tests.helpers import assert_error, assert_ok, signed_post
from tests.portal.support import portal_login
from tests.portal.team import step_up_code

pytestmark = pytest.mark.django_db


def _balance(ctx):
    return signed_post(Client(), ctx, "/openapi/v1/balance", {"currency": "PHP"})


def _upload(client, person, rsa_key, capture):
    pem = signing.public_key_to_pem(rsa_key.public_key())
    with capture(execute=True):
        return client.post("/portal/developers/keys/", {"public_key_text": pem, "code": step_up_code(person.user)},
                           follow=True)


def _confirm(client, person, version=2):
    return client.post(f"/portal/developers/keys/{version}/confirm/", {"code": step_up_code(person.user)},
                       follow=True).content.decode()


def _version(ctx, version) -> MerchantKey:
    return MerchantKey.objects.get(merchant=ctx.merchant, version=version)


def test_a_key_uploaded_in_the_portal_verifies_only_after_a_second_owner_confirms_it(
        merchant, team, rsa_keys, django_capture_on_commit_callbacks):
    owner, second = team["owner"], team["owner2"]
    uploader = portal_login(Client(), owner.user)
    page = _upload(uploader, owner, rsa_keys[2], django_capture_on_commit_callbacks).content.decode()
    assert "It signs requests once another owner confirms it" in page and "key-waiting" in page
    new_key = dataclasses.replace(merchant, key_version=2, private_key=rsa_keys[2])
    assert_error(_balance(new_key), "1104", 401)
    assert_ok(_balance(merchant))  # the current version keeps verifying

    # The other owners are told (a notice and an e-mail); the uploader gets an e-mail too.
    [notice] = Notice.objects.filter(merchant_user=second)
    assert "version 2" in notice.subject and owner.user.username in notice.body
    assert not Notice.objects.filter(merchant_user=owner).exists()
    assert {tuple(message.to) for message in mail.outbox} == {(second.user.email,), (owner.user.email,)}

    confirmer = portal_login(Client(), second.user)
    home = confirmer.get("/portal/").content.decode()
    assert "waits to go live" in home and "waiting for a second owner&#x27;s confirmation" in home
    assert "waiting for a second owner" not in uploader.get("/portal/").content.decode()
    page = _confirm(confirmer, second)
    assert "Key version 2 is live" in page
    assert_ok(_balance(new_key))
    assert_ok(_balance(merchant))
    upload = KeyUpload.objects.get(key=_version(merchant, 2))
    assert upload.uploaded_by_id == owner.user.pk and upload.confirmed_by_id == second.user.pk
    row = AuditLog.objects.get(action="merchant_key.confirm")
    assert row.actor_id == second.user.pk and row.new["uploaded_by"] == owner.user.username


def test_the_owner_who_uploaded_a_key_cannot_confirm_it(merchant, team, rsa_keys,
                                                        django_capture_on_commit_callbacks):
    owner = team["owner"]
    client = portal_login(Client(), owner.user)
    _upload(client, owner, rsa_keys[2], django_capture_on_commit_callbacks)
    waiting_until = _version(merchant, 2).live_from
    page = client.get("/portal/developers/").content.decode()
    assert "confirm-form" not in page  # no button for the uploader
    assert "You uploaded key version 2: another owner confirms it" in _confirm(client, owner)
    assert _version(merchant, 2).live_from == waiting_until
    assert_error(_balance(dataclasses.replace(merchant, key_version=2, private_key=rsa_keys[2])), "1104", 401)


def test_an_owner_invited_by_the_uploader_cannot_confirm_the_key(merchant, team, rsa_keys,
                                                                 django_capture_on_commit_callbacks):
    owner, invited = team["owner"], team["owner2"]
    account_act_record(actor=owner.user, subject=invited.user, act=AccountAct.Act.INVITED)
    _upload(portal_login(Client(), owner.user), owner, rsa_keys[2], django_capture_on_commit_callbacks)
    waiting_until = _version(merchant, 2).live_from
    page = _confirm(portal_login(Client(), invited.user), invited)
    assert "are not independent" in page and "needs an owner independent of" in page
    assert _version(merchant, 2).live_from == waiting_until
    assert not KeyUpload.objects.filter(confirmed_by__isnull=False).exists()
    assert_error(_balance(dataclasses.replace(merchant, key_version=2, private_key=rsa_keys[2])), "1104", 401)


def test_a_waiting_key_goes_live_by_itself_after_the_wait(merchant, team, rsa_keys, settings,
                                                          django_capture_on_commit_callbacks):
    owner = team["owner"]
    _upload(portal_login(Client(), owner.user), owner, rsa_keys[2], django_capture_on_commit_callbacks)
    key = _version(merchant, 2)
    assert timedelta(hours=settings.PORTAL_KEY_WAIT_HOURS - 0.1) < key.live_from - timezone.now() <= timedelta(
        hours=settings.PORTAL_KEY_WAIT_HOURS)
    new_key = dataclasses.replace(merchant, key_version=2, private_key=rsa_keys[2])
    assert_error(_balance(new_key), "1104", 401)
    MerchantKey.objects.filter(pk=key.pk).update(live_from=timezone.now() - timedelta(seconds=1))
    assert_ok(_balance(new_key))


def test_another_owner_revokes_a_waiting_key_and_it_never_verifies(merchant, team, rsa_keys,
                                                                   django_capture_on_commit_callbacks):
    owner, second = team["owner"], team["owner2"]
    _upload(portal_login(Client(), owner.user), owner, rsa_keys[2], django_capture_on_commit_callbacks)
    portal_login(Client(), second.user).post("/portal/developers/keys/2/revoke/", {"code": step_up_code(second.user)})
    key = _version(merchant, 2)
    assert key.revoked_at is not None
    MerchantKey.objects.filter(pk=key.pk).update(live_from=timezone.now() - timedelta(seconds=1))
    assert_error(_balance(dataclasses.replace(merchant, key_version=2, private_key=rsa_keys[2])), "1104", 401)
    assert_ok(_balance(merchant))


def test_a_second_key_cannot_be_uploaded_while_one_waits(merchant, team, rsa_keys, django_capture_on_commit_callbacks):
    owner = team["owner"]
    client = portal_login(Client(), owner.user)
    _upload(client, owner, rsa_keys[2], django_capture_on_commit_callbacks)
    page = _upload(client, team["owner"], rsa_keys[1], django_capture_on_commit_callbacks).content.decode()
    assert "Key version 2 waits to go live" in page
    assert MerchantKey.objects.filter(merchant=merchant.merchant).count() == 2


def test_the_current_key_cannot_be_revoked_while_its_successor_waits(merchant, team, rsa_keys,
                                                                    django_capture_on_commit_callbacks):
    owner = team["owner"]
    client = portal_login(Client(), owner.user)
    _upload(client, owner, rsa_keys[2], django_capture_on_commit_callbacks)
    page = client.post("/portal/developers/keys/1/revoke/", {"code": step_up_code(owner.user)},
                       follow=True).content.decode()
    assert "Key version 1 is your last live key" in page
    assert _version(merchant, 1).revoked_at is None
    assert_ok(_balance(merchant))
