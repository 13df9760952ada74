"""The payout reversal as a staff request (four eyes, docs/back-office.md): asked for on the payout list, applied
by payout_reverse_in_transaction when a second person approves it (apps.common.staff_requests)."""

from apps.common.amounts import AmountOutOfBounds, amount_check
from apps.common.models import StaffRequest
from apps.common.setting_changes import setting_change_kind
from apps.common.staff_requests import ChangeLine, StaffRequestKind, StaffRequestRefused, staff_request_kind_register
from apps.currencies.formatting import format_minor
from apps.merchants.selectors import merchant_administrator_conflict
from apps.payout.models import DenyListedAccount, Payout
from apps.payout.services import REVERSE_PERMISSION, payout_reverse_in_transaction


def _reversible(payload: dict) -> Payout:
    payout = Payout.objects.select_related("currency", "merchant").filter(pk=payload["payout_id"]).first()
    if payout is None:
        raise StaffRequestRefused(f"no payout {payload['payout_id']}")
    if payout.status != Payout.Status.SUCCESS or payout.reversed_at:
        raise StaffRequestRefused(f"payout {payout} is {payout.status}"
                                  f"{' and already reversed' if payout.reversed_at else ''}; only an unreversed "
                                  f"SUCCESS payout can be reversed.")
    try:
        amount_check(payload["reversal_amount"], what="reversal amount", maximum=payout.amount)
        amount_check(payload["fee_refund"], what="fee refund", minimum=0, maximum=payout.fee)
    except AmountOutOfBounds as exc:
        raise StaffRequestRefused(str(exc)) from None
    return payout


def _describe(payload: dict) -> str:
    payout = _reversible(payload)
    return (f"Reverse payout {payout}: {format_minor(payload['reversal_amount'], payout.currency)} "
            f"+ fee refund {format_minor(payload['fee_refund'], payout.currency)} to {payout.merchant.merchant_no}")


def _changes(payload: dict) -> list[ChangeLine]:
    payout = _reversible(payload)
    subject = f"payout {payout.platform_order_no} ({payout.merchant.merchant_no})"
    back = payload["reversal_amount"] + payload["fee_refund"]
    return [ChangeLine(subject=subject, field="status", current=f"{payout.status}, not reversed",
                       new=f"{payout.status}, reversed"),
            ChangeLine(subject=subject, field="reversal amount", current="",
                       new=format_minor(payload["reversal_amount"], payout.currency),
                       detail=f"of {format_minor(payout.amount, payout.currency)} paid out"),
            ChangeLine(subject=subject, field="fee refund", current="",
                       new=format_minor(payload["fee_refund"], payout.currency),
                       detail=f"of a {format_minor(payout.fee, payout.currency)} fee"),
            ChangeLine(subject=subject, field="merchant's available balance", current="",
                       new=f"credit {format_minor(back, payout.currency)}")]


def _apply(*, payload: dict, actor, reason: str) -> dict:
    payout = payout_reverse_in_transaction(payout_id=payload["payout_id"], reversal_amount=payload["reversal_amount"],
                                           fee_refund=payload["fee_refund"], actor=actor, source="admin",
                                           reason=reason)
    return {"platform_order_no": payout.platform_order_no, "reversed_at": payout.reversed_at.isoformat()}


def _conflict(payload: dict, user) -> str:
    merchant_no = (Payout.objects.filter(pk=payload["payout_id"]).values_list("merchant__merchant_no", flat=True)
                   .first() or "")
    return merchant_administrator_conflict(merchant_no=merchant_no, user=user)


staff_request_kind_register(StaffRequest.Kind.PAYOUT_REVERSAL, StaffRequestKind(
    permission=REVERSE_PERMISSION, describe=_describe, changes=_changes, apply=_apply, conflict=_conflict))


# Lifting (or editing) a deny-list entry: held payouts to that payee would no longer go to review.
# Adding one stays immediate: it only holds more payouts back.
staff_request_kind_register(StaffRequest.Kind.DENY_LIST_SETTING, setting_change_kind(
    models_=(DenyListedAccount,), permission="payout.change_denylistedaccount"))
