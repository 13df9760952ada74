"""The merchant key upload as a staff request (four eyes, docs/back-office.md): asked for on the merchant key
page, added by merchant_key_add_in_transaction when a second person approves it (apps.common.staff_requests).
Also the merchant's money settings: its callback URLs and activation, its currencies' review and
two-approval thresholds, its products and apps, and the products' fees and limits (apps.common.setting_changes)."""

from apps.common import signing
from apps.common.models import StaffRequest
from apps.common.setting_changes import setting_change_kind
from apps.common.staff_requests import ChangeLine, StaffRequestKind, StaffRequestRefused, staff_request_kind_register
from apps.merchants.models import App, Merchant, MerchantCurrency, MerchantKey, MerchantProduct, Product
from apps.merchants.selectors import merchant_administrator_conflict
from apps.merchants.services import MerchantInputError, merchant_key_add_in_transaction, public_key_check

ADD_KEY_PERMISSION = "merchants.add_merchantkey"


def _describe(payload: dict) -> str:
    try:
        public_key_check(payload["public_key_pem"])
    except MerchantInputError as exc:
        raise StaffRequestRefused(str(exc)) from None
    return f"New key version for {payload['merchant_no']} (fingerprint {signing.fingerprint(payload['public_key_pem'])})"


def _changes(payload: dict) -> list[ChangeLine]:
    """The keys that verify the merchant's requests now, and the one approval adds (a public key: shown whole)."""
    _describe(payload)
    keys = MerchantKey.objects.filter(merchant__merchant_no=payload["merchant_no"], revoked_at__isnull=True)
    current = ", ".join(f"v{key.version} (fingerprint {key.fingerprint})" for key in keys.order_by("version"))
    return [ChangeLine(subject=f"merchant {payload['merchant_no']}", field="signing keys in use",
                       current=current or "(none)",
                       new=f"{current + ' and ' if current else ''}a new version "
                           f"(fingerprint {signing.fingerprint(payload['public_key_pem'])})",
                       detail=payload["public_key_pem"].strip())]


def _apply(*, payload: dict, actor, reason: str) -> dict:
    key = merchant_key_add_in_transaction(merchant_no=payload["merchant_no"], public_key_pem=payload["public_key_pem"],
                                          actor=actor)
    return {"merchant_no": payload["merchant_no"], "key_version": key.version, "fingerprint": key.fingerprint}


def _conflict(payload: dict, user) -> str:
    return merchant_administrator_conflict(merchant_no=payload["merchant_no"], user=user)


staff_request_kind_register(StaffRequest.Kind.MERCHANT_KEY, StaffRequestKind(
    permission=ADD_KEY_PERMISSION, describe=_describe, changes=_changes, apply=_apply, conflict=_conflict))


def _setting_conflict(payload: dict, user) -> str:
    parent = payload.get("parent") or {}
    merchant_no = Merchant.objects.filter(pk=parent.get("pk")).values_list("merchant_no", flat=True).first() or ""
    return merchant_administrator_conflict(merchant_no=merchant_no, user=user)


staff_request_kind_register(StaffRequest.Kind.MERCHANT_SETTING, setting_change_kind(
    models_=(Merchant, MerchantCurrency, MerchantProduct, App), permission="merchants.change_merchant",
    conflict=_setting_conflict))
staff_request_kind_register(StaffRequest.Kind.PRODUCT_SETTING, setting_change_kind(
    models_=(Product,), permission="merchants.change_product"))
