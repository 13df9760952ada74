"""The admin: standard model permissions, PEM key upload checked before any write, the ledger read-only."""

import pytest
from django.contrib.auth.models import Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.common import signing
from apps.common.models import AuditLog
from apps.ledger.models import LedgerAccount
from apps.ledger.services import balance_adjust
from apps.merchants.models import Merchant, MerchantKey, PlatformKey
from tests.support.staff import admin_login


def pem_upload(key, name="key.pem") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, signing.public_key_to_pem(key.public_key()).encode(), "application/x-pem-file")


@pytest.fixture
def staff_client(client, db):
    user = User.objects.create_user("clerk", password="pw", is_staff=True)
    admin_login(client, user)
    client.user = user
    return client


@pytest.fixture
def superuser_client(client, db):
    user = User.objects.create_superuser("root", password="pw")
    admin_login(client, user)
    client.user = user
    return client


def test_staff_without_permissions_is_refused_the_merchant_pages(staff_client, merchant):
    assert staff_client.get("/admin/merchants/merchant/").status_code == 403
    assert staff_client.get(f"/admin/merchants/merchant/{merchant.merchant.pk}/change/").status_code == 403
    assert staff_client.get("/admin/merchants/merchantkey/add/").status_code == 403
    assert staff_client.get("/admin/ledger/ledgeraccount/").status_code == 403


def test_staff_with_view_permission_sees_merchants_but_cannot_change_or_upload(staff_client, merchant):
    staff_client.user.user_permissions.add(Permission.objects.get(codename="view_merchant"),
                                           Permission.objects.get(codename="view_merchantkey"))
    assert staff_client.get("/admin/merchants/merchant/").status_code == 200
    response = staff_client.post(f"/admin/merchants/merchant/{merchant.merchant.pk}/change/",
                                 {"name": "Renamed", "is_active": ""})
    assert response.status_code == 403
    assert staff_client.get("/admin/merchants/merchantkey/add/").status_code == 403
    assert Merchant.objects.get(pk=merchant.merchant.pk).name == "Acme"


def test_anonymous_is_sent_to_the_login_page(client, db):
    response = client.get("/admin/merchants/merchant/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def _approve_requests(approver_name: str = "second") -> None:
    """A second superuser approves every pending staff request (four eyes)."""
    from apps.common.models import StaffRequest
    from apps.common.staff_requests import staff_request_approve

    approver = User.objects.create_superuser(approver_name, password="pw")
    for pk in StaffRequest.objects.filter(status="PENDING").values_list("pk", flat=True):
        staff_request_approve(request_id=pk, approver=approver, reason="checked with the merchant")


def test_superuser_uploads_a_key_file_as_a_request_a_second_person_approves(superuser_client, merchant, rsa_keys):
    response = superuser_client.post("/admin/merchants/merchantkey/add/", {
        "merchant": merchant.merchant_no, "public_key_file": pem_upload(rsa_keys[2]), "reason": "rotation ticket"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert not MerchantKey.objects.filter(merchant=merchant.merchant, version=2).exists()  # not before approval
    _approve_requests()
    key = MerchantKey.objects.get(merchant=merchant.merchant, version=2)
    assert key.fingerprint == signing.fingerprint(signing.public_key_to_pem(rsa_keys[2].public_key()))
    assert AuditLog.objects.filter(action="merchant_key.add", actor__username="second").exists()
    assert AuditLog.objects.filter(action="staff_request.create", actor=superuser_client.user).exists()
    page = superuser_client.get(f"/admin/merchants/merchantkey/{key.pk}/change/").content.decode()
    assert key.fingerprint in page and "PRIVATE" not in page


def test_superuser_can_paste_a_key_instead_of_uploading(superuser_client, merchant, rsa_keys):
    response = superuser_client.post("/admin/merchants/merchantkey/add/", {
        "merchant": merchant.merchant_no, "public_key_text": signing.public_key_to_pem(rsa_keys[2].public_key()),
        "reason": "rotation"})
    assert response.status_code == 302
    _approve_requests()
    assert MerchantKey.objects.filter(merchant=merchant.merchant, version=2).exists()


def test_a_1024_bit_key_upload_is_refused_with_a_form_error(superuser_client, merchant):
    response = superuser_client.post("/admin/merchants/merchantkey/add/", {
        "merchant": merchant.merchant_no, "public_key_file": pem_upload(signing.generate_private_key(1024))})
    assert response.status_code == 200
    assert "1024 bits; at least 2048 are required" in response.context["form"].non_field_errors()[0]
    assert "1024 bits" in response.content.decode()
    assert MerchantKey.objects.filter(merchant=merchant.merchant).count() == 1


def test_a_non_rsa_or_private_key_upload_is_refused_with_a_form_error(superuser_client, merchant, rsa_keys):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    ec_pem = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    private_pem = signing.private_key_to_pem(rsa_keys[2])
    for content, message in [(ec_pem, "not an RSA public key"), (private_pem, "not a PEM public key")]:
        response = superuser_client.post("/admin/merchants/merchantkey/add/", {
            "merchant": merchant.merchant_no, "public_key_file": SimpleUploadedFile("k.pem", content)})
        assert response.status_code == 200
        errors = " ".join(response.context["form"].non_field_errors())
        assert message in errors
        assert "BEGIN" not in errors  # the uploaded material is never echoed back
    assert MerchantKey.objects.filter(merchant=merchant.merchant).count() == 1


def test_superuser_creates_a_merchant_with_a_key_in_the_admin(superuser_client, bootstrapped, rsa_keys):
    response = superuser_client.post("/admin/merchants/merchant/add/", {
        "name": "Admin Made", "currencies": ["PHP", "JPY"], "collection_callback_url": "https://m.example/cb",
        "payout_callback_url": "", "public_key_file": pem_upload(rsa_keys[1])})
    assert response.status_code == 302, response.content.decode()[:2000]
    merchant = Merchant.objects.get(name="Admin Made")
    assert merchant.apps.count() == 1 and merchant.keys.get().version == 1
    assert sorted(merchant.currencies.values_list("currency_id", flat=True)) == ["JPY", "PHP"]


def test_merchant_form_refuses_a_non_http_callback_url(superuser_client, merchant):
    response = superuser_client.post(f"/admin/merchants/merchant/{merchant.merchant.pk}/change/", {
        "name": "Acme", "is_active": "on", "collection_callback_url": "javascript:alert(1)",
        "payout_callback_url": "", **_empty_inlines(merchant)})
    assert response.status_code == 200
    assert "http(s)" in str(response.context["adminform"].form.errors)


def _empty_inlines(merchant) -> dict:
    """Management forms of the merchant page's inlines, unchanged."""
    data = {}
    m = merchant.merchant
    for prefix, rows in [("apps", list(m.apps.all())), ("keys", list(m.keys.all())),
                         ("currencies", list(m.currencies.all())), ("merchant_products", list(m.merchant_products.all()))]:
        data.update({f"{prefix}-TOTAL_FORMS": str(len(rows)), f"{prefix}-INITIAL_FORMS": str(len(rows)),
                     f"{prefix}-MIN_NUM_FORMS": "0", f"{prefix}-MAX_NUM_FORMS": "1000"})
        for i, row in enumerate(rows):
            data[f"{prefix}-{i}-id"] = str(row.pk)
            data[f"{prefix}-{i}-merchant"] = str(m.pk)
            if prefix == "apps":
                data.update({f"{prefix}-{i}-name": row.name, f"{prefix}-{i}-is_active": "on"})
            if prefix == "currencies":
                data.update({f"{prefix}-{i}-currency": row.currency_id, f"{prefix}-{i}-is_enabled": "on",
                             f"{prefix}-{i}-payout_review_threshold": str(row.payout_review_threshold),
                             f"{prefix}-{i}-payout_dual_approval_threshold": str(row.payout_dual_approval_threshold)})
            if prefix == "merchant_products":
                data.update({f"{prefix}-{i}-product": str(row.product_id), f"{prefix}-{i}-is_enabled": "on"})
    return data


def test_superuser_disables_a_merchant_and_changes_a_review_threshold_with_an_audit_row(superuser_client, merchant):
    data = _empty_inlines(merchant)
    data.update({"name": "Acme", "is_active": "", "collection_callback_url": "", "payout_callback_url": "",
                 "change_reason": "merchant asked to pause"})
    data["currencies-0-payout_review_threshold"] = "123456"
    response = superuser_client.post(f"/admin/merchants/merchant/{merchant.merchant.pk}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else ""
    merchant.merchant.refresh_from_db()
    assert merchant.merchant.is_active is True  # one request for both changes, waiting for a second person
    _approve_requests()
    merchant.merchant.refresh_from_db()
    assert merchant.merchant.is_active is False
    assert merchant.merchant.currencies.get(currency_id="PHP").payout_review_threshold == 123456
    change = AuditLog.objects.get(action="merchant.change")
    assert change.old == {"is_active": True} and change.new["is_active"] is False
    assert AuditLog.objects.filter(action="merchantcurrency.change").exists()


def test_platform_key_page_never_shows_the_private_key(superuser_client, bootstrapped):
    key = PlatformKey.objects.get(is_current=True)
    for url in ["/admin/merchants/platformkey/", f"/admin/merchants/platformkey/{key.pk}/change/"]:
        page = superuser_client.get(url).content.decode()
        assert "PRIVATE" not in page and key.private_key_encrypted[:40] not in page
        assert signing.fingerprint(key.public_key_pem) in page


def test_superuser_rotates_the_platform_key_in_the_admin(superuser_client, bootstrapped):
    assert superuser_client.get("/admin/merchants/platformkey/add/").status_code == 200
    response = superuser_client.post("/admin/merchants/platformkey/add/", {})
    assert response.status_code == 302
    assert PlatformKey.objects.get(is_current=True).version == 2


def test_ledger_is_read_only_even_for_a_superuser(superuser_client, merchant):
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=100, reason="float")
    account = LedgerAccount.objects.get(merchant=merchant.merchant, currency_id="PHP", kind="available")
    for model in ["ledgeraccount", "posting", "entry", "hold"]:
        assert superuser_client.get(f"/admin/ledger/{model}/").status_code == 200
        assert superuser_client.get(f"/admin/ledger/{model}/add/").status_code == 403
    page = superuser_client.get(f"/admin/ledger/ledgeraccount/{account.pk}/change/")
    assert page.status_code == 200 and 'name="balance"' not in page.content.decode()
    response = superuser_client.post(f"/admin/ledger/ledgeraccount/{account.pk}/change/", {"balance": "999999"})
    assert response.status_code == 403
    assert superuser_client.post(f"/admin/ledger/ledgeraccount/{account.pk}/delete/", {"post": "yes"}).status_code == 403
    account.refresh_from_db()
    assert account.balance == 100


def test_audit_log_is_read_only(superuser_client, merchant):
    entry = AuditLog.objects.first()
    assert superuser_client.get("/admin/common/auditlog/").status_code == 200
    assert superuser_client.get("/admin/common/auditlog/add/").status_code == 403
    assert superuser_client.post(f"/admin/common/auditlog/{entry.pk}/delete/", {"post": "yes"}).status_code == 403


def test_revoke_action_revokes_selected_keys(superuser_client, merchant):
    key = MerchantKey.objects.get(merchant=merchant.merchant, version=1)
    response = superuser_client.post("/admin/merchants/merchantkey/", {
        "action": "revoke_selected", "_selected_action": [str(key.pk)]})
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None
