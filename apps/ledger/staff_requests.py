"""The balance adjustment as a staff request (four eyes, docs/back-office.md): asked for on the staff request
page, posted by balance_adjust_in_transaction when a second person approves it (apps.common.staff_requests)."""

from apps.common.amounts import AmountOutOfBounds, signed_amount_check
from apps.common.models import StaffRequest
from apps.common.staff_requests import StaffRequestKind, StaffRequestRefused, staff_request_kind_register
from apps.currencies.formatting import format_minor
from apps.currencies.models import Currency
from apps.ledger.services import balance_adjust_in_transaction
from apps.merchants.models import MerchantCurrency
from apps.merchants.selectors import merchant_administrator_conflict

# Declared on StaffRequest (a permission row of apps.common since its migration 0002; kept there, not moved).
ADJUST_PERMISSION = "common.adjust_balance"


def _describe(payload: dict) -> str:
    try:
        signed_amount_check(payload["amount"])
    except AmountOutOfBounds as exc:
        raise StaffRequestRefused(str(exc)) from None
    if not MerchantCurrency.objects.filter(merchant__merchant_no=payload["merchant_no"],
                                           currency_id=payload["currency"], is_enabled=True).exists():
        raise StaffRequestRefused(f"currency {payload['currency']} is not enabled for merchant "
                                  f"{payload['merchant_no']} (or no such merchant).")
    amount = format_minor(payload["amount"], Currency.objects.get(pk=payload["currency"]))
    return f"{'Credit' if payload['amount'] > 0 else 'Debit'} {amount} to {payload['merchant_no']} available"


def _apply(*, payload: dict, actor, reason: str) -> dict:
    return balance_adjust_in_transaction(merchant_no=payload["merchant_no"], currency=payload["currency"],
                                         amount=payload["amount"], reason=reason, actor=actor)


def _conflict(payload: dict, user) -> str:
    return merchant_administrator_conflict(merchant_no=payload["merchant_no"], user=user)


def _form_context() -> dict:
    """Each currency's scale and symbol, for the request form's live preview of the amount in major units."""
    return {"currencies": {c.code: {"code": c.code, "symbol": c.symbol, "minor_unit": c.minor_unit}
                           for c in Currency.objects.order_by("code")}}


staff_request_kind_register(StaffRequest.Kind.BALANCE_ADJUSTMENT, StaffRequestKind(
    permission=ADJUST_PERMISSION, describe=_describe, apply=_apply, conflict=_conflict, form_context=_form_context))
