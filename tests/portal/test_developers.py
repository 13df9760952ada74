"""The developers page's services (apps/portal/developers.py): keys, platform keys, callback URLs, test callbacks."""

import dataclasses
import time

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from django.test import Client

from apps.common import signing
from apps.common.models import AuditLog
from apps.common.step_up import SecondFactorRefused
from apps.merchants.models import MerchantKey
from apps.merchants.selectors import public_key_object
from apps.portal import developers
from apps.portal.developers import PortalNotFound, PortalRefused
from tests.helpers import MerchantCtx, assert_error, assert_ok, at_once, signed_post
from tests.portal.team import device_of, member
from tests.support.receiver import Reply

pytestmark = pytest.mark.django_db


def _pem(private_key) -> str:
    return signing.public_key_to_pem(private_key.public_key())


def _balance(ctx: MerchantCtx):
    return signed_post(Client(), ctx, "/openapi/v1/balance", {"currency": "PHP"})


# --- keys ------------------------------------------------------------------------------------------------------


def test_owner_uploads_a_key_with_a_fresh_code_and_it_signs_requests_once_a_second_owner_confirms_it(
        merchant, team, rsa_keys):
    owner = team["owner"]
    key = developers.portal_key_upload(actor=owner, public_key_pem=_pem(rsa_keys[2]), otp_code=owner.code())
    assert key.version == 2 and key.merchant_id == merchant.merchant.pk
    new_key = dataclasses.replace(merchant, key_version=2, private_key=rsa_keys[2])
    assert_error(_balance(new_key), "1104", 401)  # waiting: the new version does not verify yet
    assert_ok(_balance(merchant))  # version 1 keeps verifying (docs/api.md, "Keys")
    row = AuditLog.objects.get(action="merchant_key.add", object_id=str(key.pk))
    assert (row.actor_id, row.actor_label) == (owner.user.pk, owner.user.username)
    developers.portal_key_confirm(actor=team["owner2"], key_version=2, otp_code=team["owner2"].code())
    assert_ok(_balance(new_key))
    assert_ok(_balance(merchant))


@pytest.mark.parametrize("role", ["finance", "developer", "viewer"])
def test_only_the_owner_uploads_keys(team, rsa_keys, role):
    someone = team[role]
    with pytest.raises(PortalRefused, match="Only owner"):
        developers.portal_key_upload(actor=someone, public_key_pem=_pem(rsa_keys[2]), otp_code=someone.code())
    assert MerchantKey.objects.filter(merchant=someone.merchant).count() == 1


def test_key_upload_without_the_right_code_changes_nothing(team, rsa_keys):
    owner = team["owner"]
    right = owner.code()
    wrong = f"{(int(right) + 1) % 1_000_000:06d}"
    for code in (wrong, "", "12345", "abcdef"):
        with pytest.raises(SecondFactorRefused):
            developers.portal_key_upload(actor=owner, public_key_pem=_pem(rsa_keys[2]), otp_code=code)
    assert MerchantKey.objects.filter(merchant=owner.merchant).count() == 1
    assert device_of(owner).throttling_failure_count == 1  # the wrong code was counted; the malformed ones never reached it


def test_a_code_already_used_is_refused_the_second_time(team, rsa_keys):
    owner = team["owner"]
    code = owner.code()
    developers.portal_key_upload(actor=owner, public_key_pem=_pem(rsa_keys[2]), otp_code=code)
    with pytest.raises(SecondFactorRefused, match="already used"):
        developers.portal_key_revoke(actor=owner, key_version=2, otp_code=code)
    assert MerchantKey.objects.get(merchant=owner.merchant, version=2).revoked_at is None


@pytest.mark.parametrize("pem, words", [
    ("not a key", "not a PEM public key"),
    ("-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----", "PRIVATE key"),
    (b"\xff\xfe binary", r"not a PEM \(text\) file"),
    (b"A" * 20000, "too large"),
])
def test_a_key_that_is_not_an_rsa_public_key_pem_is_refused_before_the_code_is_spent(team, pem, words):
    owner = team["owner"]
    code = owner.code()
    with pytest.raises(PortalRefused, match=words):
        developers.portal_key_upload(actor=owner, public_key_pem=pem, otp_code=code)
    assert device_of(owner).last_t == -1  # the code was not used up


def test_small_and_non_rsa_keys_are_refused(team):
    owner = team["owner"]
    small = signing.public_key_to_pem(signing.generate_private_key(1024).public_key())
    with pytest.raises(PortalRefused, match="1024 bits; at least 2048"):
        developers.portal_key_upload(actor=owner, public_key_pem=small, otp_code=owner.code())
    from cryptography.hazmat.primitives import serialization
    ec_pem = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    with pytest.raises(PortalRefused, match="not an RSA public key"):
        developers.portal_key_upload(actor=owner, public_key_pem=ec_pem, otp_code=owner.code())


def test_the_active_key_again_is_refused(merchant, team, rsa_keys):
    owner = team["owner"]
    with pytest.raises(PortalRefused, match="already an active version"):
        developers.portal_key_upload(actor=owner, public_key_pem=_pem(rsa_keys[0]), otp_code=owner.code())


def test_owner_revokes_an_old_key_and_requests_signed_with_it_get_1104(merchant, team, rsa_keys):
    owner = team["owner"]
    developers.portal_key_upload(actor=owner, public_key_pem=_pem(rsa_keys[2]), otp_code=owner.code())
    developers.portal_key_confirm(actor=team["owner2"], key_version=2, otp_code=team["owner2"].code())
    developers.portal_key_revoke(actor=owner, key_version=1, otp_code=owner.code())
    assert_error(_balance(merchant), "1104", 401)
    assert_ok(_balance(dataclasses.replace(merchant, key_version=2, private_key=rsa_keys[2])))
    row = AuditLog.objects.get(action="merchant_key.revoke")
    assert row.actor_id == owner.user.pk and row.new == {"version": 1}


def test_the_last_live_key_cannot_be_revoked(merchant, team):
    owner = team["owner"]
    code = owner.code()
    with pytest.raises(PortalRefused, match="last live key"):
        developers.portal_key_revoke(actor=owner, key_version=1, otp_code=code)
    assert device_of(owner).last_t == -1  # refused before the code was spent
    assert_ok(_balance(merchant))


def test_revoking_is_scoped_to_the_owners_merchant(merchant, other_merchant, team, other_team, rsa_keys):
    developers.portal_key_upload(actor=team["owner"], public_key_pem=_pem(rsa_keys[2]), otp_code=team["owner"].code())
    # The other merchant's owner names version 2 (the first merchant's): not theirs.
    with pytest.raises(PortalNotFound):
        developers.portal_key_revoke(actor=other_team["owner"], key_version=2, otp_code=other_team["owner"].code())
    assert MerchantKey.objects.get(merchant=merchant.merchant, version=2).revoked_at is None
    assert_ok(_balance(other_merchant))


@pytest.mark.django_db(transaction=True)
def test_two_owners_revoking_the_two_last_keys_at_once_leave_one_active(merchant, team, rsa_keys, monkeypatch):
    owners = [team["owner"], team["owner2"]]
    developers.portal_key_upload(actor=owners[0], public_key_pem=_pem(rsa_keys[2]), otp_code=owners[0].code())
    developers.portal_key_confirm(actor=owners[1], key_version=2, otp_code=owners[1].code())  # both live
    checked = developers._revocable

    def slow_check(**kwargs):  # widen the window between the locked check and the write
        key = checked(**kwargs)
        if kwargs.get("lock"):
            time.sleep(0.5)
        return key

    monkeypatch.setattr(developers, "_revocable", slow_check)
    # Both past their second factor (checked before the locked part, each on its own device), revoking at once.
    outcomes = at_once(lambda i: developers._key_revoke(actor=owners[i], key_version=i + 1), 2)
    refused = [exc for _, exc in outcomes if exc is not None]
    assert len(refused) == 1 and isinstance(refused[0], PortalRefused), outcomes
    assert MerchantKey.objects.filter(merchant=merchant.merchant, revoked_at__isnull=True).count() == 1


# --- platform keys ------------------------------------------------------------------------------------------------


def test_platform_keys_document_lists_every_version_as_the_cli_does(merchant):
    from django.core.management import call_command

    from apps.merchants.services import platform_key_rotate

    platform_key_rotate()
    document = developers.platform_keys_document()
    assert [(k["key_version"], k["current"]) for k in document["keys"]] == [(1, False), (2, True)]
    import io
    import json
    out = io.StringIO()
    call_command("platform_keys", stdout=out)
    assert json.loads(out.getvalue()) == document


# --- callback URLs ---------------------------------------------------------------------------------------------


def _urls(merchant):
    merchant.refresh_from_db()
    return {"collection_callback_url": merchant.collection_callback_url,
            "payout_callback_url": merchant.payout_callback_url}


def test_owner_changes_the_callback_urls_with_a_code_audited_with_old_and_new(merchant, team):
    owner, m = team["owner"], merchant.merchant
    was = _urls(m)
    developers.portal_callback_urls_change(actor=owner, collection_callback_url="https://shop.example/cb/collect",
                                           payout_callback_url="https://shop.example/cb/payout", was=was,
                                           otp_code=owner.code())
    assert _urls(m) == {"collection_callback_url": "https://shop.example/cb/collect",
                        "payout_callback_url": "https://shop.example/cb/payout"}
    row = AuditLog.objects.get(action="merchant.callback_urls")
    assert row.actor_id == owner.user.pk and row.old == was
    assert row.new["payout_callback_url"] == "https://shop.example/cb/payout"


@pytest.mark.parametrize("url, words", [
    ("ftp://shop.example/cb", "absolute http"),
    ("shop.example/cb", "absolute http"),
    ("https://user:secret@shop.example/cb", "credentials"),
    ("https://shop.example/" + "a" * 600, "at most 512 characters"),
])
def test_callback_urls_follow_the_admins_rules(merchant, team, url, words):
    owner = team["owner"]
    with pytest.raises(PortalRefused, match=words):
        developers.portal_callback_urls_change(actor=owner, collection_callback_url=url, payout_callback_url="",
                                               was=_urls(merchant.merchant), otp_code=owner.code())
    assert _urls(merchant.merchant)["collection_callback_url"] == ""


@pytest.mark.parametrize("host", ["127.0.0.1", "10.0.0.5", "169.254.169.254", "[::1]", "localhost"])
def test_private_hosts_are_refused_where_delivery_refuses_them(merchant, team, settings, host):
    settings.CALLBACK_ALLOW_PRIVATE_HOSTS = False
    owner = team["owner"]
    with pytest.raises(PortalRefused, match="non-public address"):
        developers.portal_callback_urls_change(actor=owner, collection_callback_url=f"http://{host}:9000/cb",
                                               payout_callback_url="", was=_urls(merchant.merchant),
                                               otp_code=owner.code())


def test_a_change_made_meanwhile_is_not_overwritten(merchant, team):
    owner, m = team["owner"], merchant.merchant
    was = _urls(m)
    m.payout_callback_url = "https://changed.example/by-staff"
    m.save()
    with pytest.raises(PortalRefused, match="changed by someone else"):
        developers.portal_callback_urls_change(actor=owner, collection_callback_url="https://a.example/c",
                                               payout_callback_url="https://a.example/p", was=was,
                                               otp_code=owner.code())
    assert _urls(m)["payout_callback_url"] == "https://changed.example/by-staff"


@pytest.mark.parametrize("role", ["finance", "developer", "viewer"])
def test_only_the_owner_changes_callback_urls(merchant, team, role):
    with pytest.raises(PortalRefused, match="Only owner"):
        developers.portal_callback_urls_change(actor=team[role], collection_callback_url="https://a.example/c",
                                               payout_callback_url="", was=_urls(merchant.merchant),
                                               otp_code=team[role].code())


def test_a_pending_staff_request_on_the_urls_goes_stale_after_the_owners_change(merchant, team):
    """The owner's change and a staff member's request on the same row never merge: the request is refused."""
    from apps.common.setting_changes import setting_change

    m = merchant.merchant
    proposed = type(m).objects.get(pk=m.pk)
    proposed.payout_callback_url = "https://staff.example/p"
    change = setting_change(proposed=proposed)
    developers.portal_callback_urls_change(actor=team["owner"], collection_callback_url="",
                                           payout_callback_url="https://owner.example/p", was=_urls(m),
                                           otp_code=team["owner"].code())
    from apps.common.setting_changes import setting_digest
    assert change["digest"] != setting_digest(type(m).objects.get(pk=m.pk))


# --- test callback -----------------------------------------------------------------------------------------------


def _set_url(merchant, url: str) -> None:
    type(merchant).objects.filter(pk=merchant.pk).update(collection_callback_url=url, payout_callback_url=url)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["collection", "payout"])
def test_test_callback_is_signed_like_a_real_one_and_shows_the_reply(bootstrapped, rsa_keys, callback_receiver,
                                                                     kind):
    from tests.conftest import make_merchant

    ctx = make_merchant(rsa_keys[0])
    developer = member(ctx.merchant, "developer")
    _set_url(ctx.merchant, callback_receiver.url)
    result = developers.portal_test_callback_send(actor=developer, kind=kind)
    [received] = callback_receiver.wait_for(1)
    body = received.body
    assert body == result.body
    # Verified as a merchant would: the platform's published key of the body's key_version (docs/api.md, "Keys").
    keys = {k["key_version"]: k["public_key"] for k in developers.platform_keys_document()["keys"]}
    assert signing.verify(public_key_object(keys[body["key_version"]]), body, body["sign"])
    assert body["platform_order_no"].startswith("TEST") and body["mch_order_no"].startswith("test-callback-")
    assert {"timestamp", "nonce", "sign_type"} <= set(body) and body["status"] == "SUCCESS"
    assert ("paid_at" in body) == (kind == "collection")
    assert (result.http_status, result.reply, result.error, result.success) == (200, "success", "", True)
    assert result.duration_ms >= 0
    row = AuditLog.objects.get(action="callback.test")
    assert row.actor_id == developer.user.pk and row.new["http_status"] == 200


@pytest.mark.django_db(transaction=True)
def test_test_callback_shows_a_failing_reply_truncated(bootstrapped, rsa_keys, callback_receiver, settings):
    from tests.conftest import make_merchant

    ctx = make_merchant(rsa_keys[0])
    _set_url(ctx.merchant, callback_receiver.url)
    callback_receiver.script(Reply(500, "x" * 5000))
    result = developers.portal_test_callback_send(actor=member(ctx.merchant, "owner"), kind="payout")
    assert (result.http_status, result.error, result.success) == (500, "HTTP 500", False)
    assert result.reply == "x" * settings.CALLBACK_REPLY_EXCERPT_CHARS


@pytest.mark.django_db(transaction=True)
def test_test_callback_goes_through_the_ssrf_guard(bootstrapped, rsa_keys, callback_receiver, settings):
    from tests.conftest import make_merchant

    ctx = make_merchant(rsa_keys[0])
    _set_url(ctx.merchant, callback_receiver.url)  # set when private hosts were allowed
    settings.CALLBACK_ALLOW_PRIVATE_HOSTS = False
    result = developers.portal_test_callback_send(actor=member(ctx.merchant, "owner"), kind="payout")
    assert "non-public address 127.0.0.1" in result.error and result.http_status is None
    assert callback_receiver.requests == []


def test_test_callbacks_are_rate_limited_per_merchant(merchant, other_merchant, team, other_team):
    _set_url(merchant.merchant, "http://127.0.0.1:9/cb")  # discard port: a quick connection refused
    _set_url(other_merchant.merchant, "http://127.0.0.1:9/cb")
    for _ in range(developers.TEST_CALLBACKS_PER_MINUTE):
        assert "connection" in developers.portal_test_callback_send(actor=team["developer"], kind="payout").error
    with pytest.raises(PortalRefused, match="test callbacks a minute"):
        developers.portal_test_callback_send(actor=team["owner"], kind="payout")
    developers.portal_test_callback_send(actor=other_team["owner"], kind="payout")  # another merchant's own budget


@pytest.mark.parametrize("role", ["finance", "viewer"])
def test_finance_and_viewers_do_not_send_test_callbacks(merchant, team, role):
    _set_url(merchant.merchant, "http://127.0.0.1:9/cb")
    with pytest.raises(PortalRefused, match="Only owner or developer"):
        developers.portal_test_callback_send(actor=team[role], kind="payout")


def test_no_url_no_test_callback(merchant, team):
    with pytest.raises(PortalRefused, match="no payout callback URL"):
        developers.portal_test_callback_send(actor=team["developer"], kind="payout")
