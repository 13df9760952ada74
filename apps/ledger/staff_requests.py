"""The balance adjustment as a staff request (four eyes, docs/back-office.md): asked for on the staff request
page, posted by balance_adjust_in_transaction when a second person approves it (apps.common.staff_requests)."""

from apps.common.amounts import AmountOutOfBounds, signed_amount_check
from apps.common.models import StaffRequest
from apps.common.staff_requests import ChangeLine, StaffRequestKind, StaffRequestRefused, staff_request_kind_register
from apps.currencies.formatting import format_minor
from apps.ledger.admin_views import balance_adjustment_request_page
from apps.ledger.selectors import merchant_balances
from apps.ledger.services import balance_adjust_in_transaction
from apps.merchants.models import MerchantCurrency
from apps.merchants.selectors import merchant_administrator_conflict

# Declared on StaffRequest (a permission row of apps.common since its migration 0002; kept there, not moved).
ADJUST_PERMISSION = "ledger.adjust_balance"


def _enabled(payload: dict) -> MerchantCurrency:
    try:
        signed_amount_check(payload["amount"])
    except AmountOutOfBounds as exc:
        raise StaffRequestRefused(str(exc)) from None
    enabled = (MerchantCurrency.objects.select_related("currency")
               .filter(merchant__merchant_no=payload["merchant_no"], currency_id=payload["currency"], is_enabled=True)
               .first())
    if enabled is None:
        raise StaffRequestRefused(f"currency {payload['currency']} is not enabled for merchant "
                                  f"{payload['merchant_no']} (or no such merchant).")
    return enabled


def _describe(payload: dict) -> str:
    amount = format_minor(payload["amount"], _enabled(payload).currency)
    return f"{'Credit' if payload['amount'] > 0 else 'Debit'} {amount} to {payload['merchant_no']} available"


def _changes(payload: dict) -> list[ChangeLine]:
    """The available balance now and the credit or debit; what it comes to depends on the payments until approval."""
    enabled = _enabled(payload)
    available = merchant_balances(merchant_id=enabled.merchant_id, currency=enabled.currency_id)["available"]
    currency = enabled.currency
    return [ChangeLine(subject=f"merchant {payload['merchant_no']} ({currency.code})", field="available balance",
                       current=format_minor(available, currency),
                       new=f"{'credit' if payload['amount'] > 0 else 'debit'} "
                           f"{format_minor(abs(payload['amount']), currency)}",
                       detail=(f"{format_minor(available + payload['amount'], currency)} if approved now"
                               if available + payload["amount"] >= 0 else
                               "more than the available balance now: approval is refused until it is there"))]


def _apply(*, payload: dict, actor, reason: str) -> dict:
    return balance_adjust_in_transaction(merchant_no=payload["merchant_no"], currency=payload["currency"],
                                         amount=payload["amount"], reason=reason, actor=actor)


def _conflict(payload: dict, user) -> str:
    return merchant_administrator_conflict(merchant_no=payload["merchant_no"], user=user)


staff_request_kind_register(StaffRequest.Kind.BALANCE_ADJUSTMENT, StaffRequestKind(
    permission=ADJUST_PERMISSION, describe=_describe, changes=_changes, apply=_apply, conflict=_conflict,
    request_page=balance_adjustment_request_page))
