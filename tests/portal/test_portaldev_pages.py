"""The developers page and payouts by hand through the portal's real views: roles, cross-merchant access on every page
and download, and each form end to end."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from apps.common import signing
from apps.payout_batches.models import PayoutBatch
from apps.merchants.models import MerchantKey
from apps.payout.models import Payout
from tests.payout.conftest import fund
from tests.portal.support import portal_login
from tests.portal.team import step_up_code
from tests.portal.test_payout_batches import GOOD, csv_of

pytestmark = pytest.mark.django_db


def client_of(person) -> Client:
    return portal_login(Client(), person.user)


def _batch(team):
    from apps.payout_batches import services

    return services.payout_batch_from_csv(actor=team["finance"], file_name="p.csv", data=GOOD).batch


# --- roles ---------------------------------------------------------------------------------------------------


PAGES = {  # name -> (method, url maker, roles allowed)
    "developers": ("get", lambda b: "/portal/developers/", {"owner", "developer"}),
    "platform keys json": ("get", lambda b: "/portal/developers/platform_keys.json", {"owner", "developer"}),
    "platform key pem": ("get", lambda b: "/portal/developers/platform_key_v1.pem", {"owner", "developer"}),
    "key upload": ("post", lambda b: "/portal/developers/keys/", {"owner"}),
    "key revoke": ("post", lambda b: "/portal/developers/keys/1/revoke/", {"owner"}),
    "callback urls": ("post", lambda b: "/portal/developers/callback-urls/", {"owner"}),
    "test callback": ("post", lambda b: "/portal/developers/test-callback/", {"owner", "developer"}),
    "new payouts": ("get", lambda b: "/portal/payouts/new/", {"owner", "finance"}),
    "batches": ("get", lambda b: "/portal/payouts/batches/", {"owner", "finance"}),
    "batch": ("get", lambda b: f"/portal/payouts/batches/{b.pk}/", {"owner", "finance"}),
    "approve": ("post", lambda b: f"/portal/payouts/batches/{b.pk}/approve/", {"owner"}),
    "reject": ("post", lambda b: f"/portal/payouts/batches/{b.pk}/reject/", {"owner"}),
}


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("role", ["owner", "finance", "developer", "viewer"])
def test_each_page_answers_403_to_a_role_without_it(merchant, team, page, role):
    method, url, allowed = PAGES[page]
    response = getattr(client_of(team[role]), method)(url(_batch(team)))
    if role in allowed:
        assert response.status_code in (200, 302, 400, 429), (page, role, response.status_code)
    else:
        assert response.status_code == 403, (page, role, response.status_code)
    assert PayoutBatch.objects.get().status == "PENDING"  # no page approved or rejected on an empty form


@pytest.mark.parametrize("page", PAGES)
def test_signed_out_every_page_goes_to_sign_in(merchant, team, page):
    method, url, _ = PAGES[page]
    response = getattr(Client(), method)(url(_batch(team)))
    assert response.status_code == 302 and response["Location"].startswith("/portal/signin/")


# --- another merchant's ----------------------------------------------------------------------------------------


def test_another_merchants_batch_is_not_found_on_every_batch_page(merchant, team, other_team):
    batch = _batch(team)
    fund(merchant, 10_000_000)
    outsider = client_of(other_team["owner"])
    assert outsider.get(f"/portal/payouts/batches/{batch.pk}/").status_code == 404
    assert outsider.post(f"/portal/payouts/batches/{batch.pk}/approve/",
                         {"code": step_up_code(other_team["owner"].user)}).status_code == 404
    assert outsider.post(f"/portal/payouts/batches/{batch.pk}/reject/", {"reason": "x"}).status_code == 404
    listing = outsider.get("/portal/payouts/batches/").content.decode()
    assert f'data-batch="{batch.pk}"' not in listing
    assert client_of(other_team["finance"]).get(f"/portal/payouts/batches/{batch.pk}/").status_code == 404
    assert PayoutBatch.objects.get().status == "PENDING" and Payout.objects.count() == 0


def test_another_merchants_key_version_is_not_found(merchant, other_merchant, team, other_team, rsa_keys):
    from apps.portal import developers

    developers.portal_key_upload(actor=team["owner"], public_key_pem=signing.public_key_to_pem(
        rsa_keys[2].public_key()), otp_code=team["owner"].code())
    response = client_of(other_team["owner"]).post("/portal/developers/keys/2/revoke/",
                                                   {"code": step_up_code(other_team["owner"].user)})
    assert response.status_code == 404
    assert MerchantKey.objects.get(merchant=merchant.merchant, version=2).revoked_at is None


def test_the_developers_page_shows_only_the_merchants_own_keys_and_urls(merchant, other_merchant, team):
    type(other_merchant.merchant).objects.filter(pk=other_merchant.merchant.pk).update(
        payout_callback_url="https://other.example/secret-hook")
    page = client_of(team["owner"]).get("/portal/developers/").content.decode()
    other_fp = MerchantKey.objects.get(merchant=other_merchant.merchant).fingerprint
    assert MerchantKey.objects.get(merchant=merchant.merchant).fingerprint in page
    assert other_fp not in page and "other.example" not in page


# --- developers, end to end ------------------------------------------------------------------------------------


def test_owner_adds_and_revokes_a_key_on_the_page(merchant, team, rsa_keys):
    owner = client_of(team["owner"])
    pem = signing.public_key_to_pem(rsa_keys[2].public_key()).encode()
    response = owner.post("/portal/developers/keys/", {
        "public_key_file": SimpleUploadedFile("key.pub", pem), "code": step_up_code(team["owner"].user)})
    assert response.status_code == 302
    assert MerchantKey.objects.filter(merchant=merchant.merchant).count() == 2
    bad = owner.post("/portal/developers/keys/", {"public_key_text": "nope", "code": step_up_code(team["owner"].user)})
    assert bad.status_code == 400 and "not a PEM public key" in bad.content.decode()
    wrong = owner.post("/portal/developers/keys/2/revoke/", {"code": "000000"}, follow=True)
    assert "not right" in wrong.content.decode()
    # Version 1 is the last live key while version 2 waits; the waiting one can be withdrawn.
    owner.post("/portal/developers/keys/2/revoke/", {"code": step_up_code(team["owner"].user)})
    assert MerchantKey.objects.get(merchant=merchant.merchant, version=2).revoked_at is not None
    assert MerchantKey.objects.get(merchant=merchant.merchant, version=1).revoked_at is None


def test_owner_changes_callback_urls_on_the_page(merchant, team):
    owner = client_of(team["owner"])
    response = owner.post("/portal/developers/callback-urls/", {
        "collection_callback_url": "https://shop.example/c", "payout_callback_url": "ftp://x",
        "was_collection_callback_url": "", "was_payout_callback_url": "", "code": step_up_code(team["owner"].user)})
    assert response.status_code == 400 and "absolute http(s) URL" in response.content.decode()
    response = owner.post("/portal/developers/callback-urls/", {
        "collection_callback_url": "https://shop.example/c", "payout_callback_url": "https://shop.example/p",
        "was_collection_callback_url": "", "was_payout_callback_url": "", "code": step_up_code(team["owner"].user)})
    assert response.status_code == 302
    merchant.merchant.refresh_from_db()
    assert merchant.merchant.payout_callback_url == "https://shop.example/p"


def test_developer_sees_the_urls_without_a_form(merchant, team):
    page = client_of(team["developer"]).get("/portal/developers/").content.decode()
    assert 'id="callback-urls-view"' in page and 'id="callback-urls-form"' not in page
    assert 'id="key-upload-form"' not in page and 'id="test-callback-form"' in page


@pytest.mark.django_db(transaction=True)
def test_test_callback_on_the_page_shows_the_reply(bootstrapped, rsa_keys, callback_receiver):
    from tests.conftest import make_merchant
    from tests.portal.team import member

    ctx = make_merchant(rsa_keys[0], payout_callback_url=callback_receiver.url)
    developer = member(ctx.merchant, "developer")
    page = client_of(developer).post("/portal/developers/test-callback/", {"kind": "payout"}).content.decode()
    assert 'id="test-callback-result"' in page and "Delivered" in page and "200" in page
    assert len(callback_receiver.wait_for(1)) == 1


def test_platform_keys_download(merchant, team):
    client = client_of(team["developer"])
    document = json.loads(client.get("/portal/developers/platform_keys.json").content)
    assert document["keys"][0]["key_version"] == 1 and document["keys"][0]["current"] is True
    pem = client.get("/portal/developers/platform_key_v1.pem")
    assert pem.status_code == 200 and pem.content.decode() == document["keys"][0]["public_key"]
    signing.load_public_key(pem.content)
    assert client.get("/portal/developers/platform_key_v9.pem").status_code == 404


# --- payouts by hand, end to end --------------------------------------------------------------------------------


def test_finance_uploads_and_another_owner_approves_on_the_pages(merchant, team):
    fund(merchant, 10_000_000)
    finance = client_of(team["finance"])
    response = finance.post("/portal/payouts/new/", {"action": "upload", "file": SimpleUploadedFile("p.csv", GOOD)})
    batch = PayoutBatch.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/portal/payouts/batches/{batch.pk}/"
    again = finance.post("/portal/payouts/new/", {"action": "upload", "file": SimpleUploadedFile("p.csv", GOOD)},
                         follow=True)
    assert "asked for already" in again.content.decode() and PayoutBatch.objects.count() == 1
    page = finance.get(f"/portal/payouts/batches/{batch.pk}/").content.decode()
    assert 'id="approve-form"' not in page  # finance never decides
    home = client_of(team["owner"]).get("/portal/").content.decode()
    assert "Payout batches waiting for your approval" in home
    assert "waiting for your approval" not in client_of(team["finance"]).get("/portal/").content.decode()
    owner = client_of(team["owner"])
    assert "₱250.00" in owner.get(f"/portal/payouts/batches/{batch.pk}/").content.decode()
    response = owner.post(f"/portal/payouts/batches/{batch.pk}/approve/", {"code": step_up_code(team["owner"].user)},
                          follow=True)
    page = response.content.decode()
    assert "Approved: 3 payouts created" in page and Payout.objects.count() == 3
    assert "waiting for your approval" not in owner.get("/portal/").content.decode()


def test_a_csv_with_errors_shows_each_row_and_sends_nothing(merchant, team):
    data = csv_of("ok-1,1000,PHP,Juan,0012345678,BDO", "bad-2,12.50,PHP,Juan,0012345678,BDO",
                  "bad-3,1000,PHP,Juan,0012345678,NOPE")
    response = client_of(team["finance"]).post("/portal/payouts/new/", {
        "action": "upload", "file": SimpleUploadedFile("p.csv", data)})
    page = response.content.decode()
    assert response.status_code == 400 and 'data-line="3"' in page and 'data-line="4"' in page
    assert "1000" in page and "2006" in page and 'data-line="2"' not in page
    assert PayoutBatch.objects.count() == 0


def test_one_payout_by_hand_with_the_amount_in_pesos(merchant, team):
    response = client_of(team["finance"]).post("/portal/payouts/new/", {
        "action": "single", "mch_order_no": "hand-form-1", "product_code": "PHP_PAYOUT", "amount": "1,250.50",
        "payee_name": "Juan dela Cruz", "payee_account": "0012345678", "bank_code": "BDO", "attach": "", "note": ""})
    assert response.status_code == 302
    row = PayoutBatch.objects.get().rows.get()
    assert (row.amount, row.currency, row.mch_order_no) == (125050, "PHP", "hand-form-1")
    bad = client_of(team["finance"]).post("/portal/payouts/new/", {
        "action": "single", "mch_order_no": "hand-form-2", "product_code": "PHP_PAYOUT", "amount": "12.345",
        "payee_name": "J", "payee_account": "1", "bank_code": "BDO"})
    assert "at most 2 decimals" in bad.content.decode()


def test_the_maker_owner_sees_no_approve_button_and_cannot_post_one(merchant, team):
    from apps.payout_batches import services

    batch = services.payout_batch_from_csv(actor=team["owner"], file_name="p.csv", data=GOOD).batch
    owner = client_of(team["owner"])
    page = owner.get(f"/portal/payouts/batches/{batch.pk}/").content.decode()
    assert 'id="approve-form"' not in page and 'id="maker-note"' in page
    response = owner.post(f"/portal/payouts/batches/{batch.pk}/approve/", {"code": step_up_code(team["owner"].user)},
                          follow=True)
    assert "another owner must approve" in response.content.decode()
    assert PayoutBatch.objects.get().status == "PENDING"


def test_owner_rejects_on_the_page(merchant, team):
    batch = _batch(team)
    client_of(team["owner"]).post(f"/portal/payouts/batches/{batch.pk}/reject/", {"reason": "wrong month"})
    batch.refresh_from_db()
    assert (batch.status, batch.decision_reason) == ("REJECTED", "wrong month")


def test_a_large_batch_is_approved_at_once_and_created_by_the_task(merchant, team, monkeypatch):
    from apps.payout_batches import services, tasks

    fund(merchant, 10_000_000)
    queued = []
    monkeypatch.setattr(tasks.process_payout_batch, "delay", lambda batch_id: queued.append(batch_id))
    data = csv_of(*[f"big-{i},1000,PHP,Juan,00123{i:05d},BDO" for i in range(51)])
    batch = services.payout_batch_from_csv(actor=team["finance"], file_name="big.csv", data=data).batch
    response = client_of(team["owner"]).post(f"/portal/payouts/batches/{batch.pk}/approve/",
                                             {"code": step_up_code(team["owner"].user)}, follow=True)
    assert "are being created" in response.content.decode() and "51 still being created" in response.content.decode()
    assert queued == [batch.pk] and Payout.objects.count() == 0
    tasks.process_payout_batch(batch.pk)
    assert Payout.objects.count() == 51 and PayoutBatch.objects.get().status == "DONE"
