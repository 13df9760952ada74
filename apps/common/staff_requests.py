"""Four eyes for staff changes in the admin (docs/back-office.md): a payout reversal, a balance adjustment or a
merchant key upload is first a StaffRequest; it takes effect only when a second person with the right role
approves it, and then through the owning app's service, in the approval's one transaction with the audit rows.

The CLI (contract §8) calls the services directly: a shell on the server is the highest authority, and its
operator is recorded (`--operator`).
"""

from dataclasses import dataclass
from typing import Callable

from django.db import transaction
from django.utils import timezone

from apps.common import audit
from apps.common.models import StaffRequest


class StaffRequestRefused(ValueError):
    """The requester/approver, the role, the reason or the request's state do not allow it; nothing changed."""


@dataclass(frozen=True)
class KindSpec:
    permission: str  # needed both to ask for it and to approve it
    merchant_no: Callable[[dict], str]
    describe: Callable[[dict], str]
    apply: Callable[..., dict]  # (payload, actor, reason) -> result, inside the approval's transaction


def _reversal_merchant(payload: dict) -> str:
    from apps.payout.models import Payout

    return Payout.objects.filter(pk=payload["payout_id"]).values_list("merchant__merchant_no", flat=True).first() or ""


def _reversal_describe(payload: dict) -> str:
    from apps.currencies.formatting import format_minor
    from apps.payout.models import Payout

    payout = Payout.objects.select_related("currency", "merchant").filter(pk=payload["payout_id"]).first()
    if payout is None:
        raise StaffRequestRefused(f"no payout {payload['payout_id']}")
    if payout.status != Payout.Status.SUCCESS or payout.reversed_at:
        raise StaffRequestRefused(f"payout {payout} is {payout.status}"
                                  f"{' and already reversed' if payout.reversed_at else ''}; only an unreversed "
                                  f"SUCCESS payout can be reversed.")
    if not (1 <= payload["reversal_amount"] <= payout.amount and 0 <= payload["fee_refund"] <= payout.fee):
        raise StaffRequestRefused(f"reversal amount must be 1 to {payout.amount} and fee refund 0 to {payout.fee}.")
    return (f"Reverse payout {payout}: {format_minor(payload['reversal_amount'], payout.currency)} "
            f"+ fee refund {format_minor(payload['fee_refund'], payout.currency)} to {payout.merchant.merchant_no}")


def _reversal_apply(*, payload: dict, actor, reason: str) -> dict:
    from apps.payout.services import payout_reverse_in_transaction

    payout = payout_reverse_in_transaction(payout_id=payload["payout_id"], reversal_amount=payload["reversal_amount"],
                                           fee_refund=payload["fee_refund"], actor=actor, source="admin",
                                           reason=reason)
    return {"platform_order_no": payout.platform_order_no, "reversed_at": payout.reversed_at.isoformat()}


def _adjustment_describe(payload: dict) -> str:
    from apps.currencies.formatting import format_minor
    from apps.currencies.models import Currency

    from apps.merchants.models import MerchantCurrency

    if type(payload["amount"]) is not int or payload["amount"] == 0:
        raise StaffRequestRefused("amount must be a non-zero integer of minor units.")
    if not MerchantCurrency.objects.filter(merchant__merchant_no=payload["merchant_no"],
                                           currency_id=payload["currency"], is_enabled=True).exists():
        raise StaffRequestRefused(f"currency {payload['currency']} is not enabled for merchant "
                                  f"{payload['merchant_no']} (or no such merchant).")
    amount = format_minor(payload["amount"], Currency.objects.get(pk=payload["currency"]))
    return f"{'Credit' if payload['amount'] > 0 else 'Debit'} {amount} to {payload['merchant_no']} available"


def _adjustment_apply(*, payload: dict, actor, reason: str) -> dict:
    from apps.ledger.services import balance_adjust_in_transaction

    return balance_adjust_in_transaction(merchant_no=payload["merchant_no"], currency=payload["currency"],
                                         amount=payload["amount"], reason=reason, actor=actor)


def _key_apply(*, payload: dict, actor, reason: str) -> dict:
    from apps.merchants.services import merchant_key_add_in_transaction

    key = merchant_key_add_in_transaction(merchant_no=payload["merchant_no"], public_key_pem=payload["public_key_pem"],
                                          actor=actor)
    return {"merchant_no": payload["merchant_no"], "key_version": key.version, "fingerprint": key.fingerprint}


def _key_describe(payload: dict) -> str:
    from apps.common import signing
    from apps.merchants.services import MerchantInputError, _check_public_key

    try:
        _check_public_key(payload["public_key_pem"])
    except MerchantInputError as exc:
        raise StaffRequestRefused(str(exc)) from None
    return f"New key version for {payload['merchant_no']} (fingerprint {signing.fingerprint(payload['public_key_pem'])})"


KINDS: dict[str, KindSpec] = {
    StaffRequest.Kind.PAYOUT_REVERSAL: KindSpec("payout.reverse_payout", _reversal_merchant, _reversal_describe,
                                                _reversal_apply),
    StaffRequest.Kind.BALANCE_ADJUSTMENT: KindSpec("common.adjust_balance", lambda p: p["merchant_no"],
                                                   _adjustment_describe, _adjustment_apply),
    StaffRequest.Kind.MERCHANT_KEY: KindSpec("merchants.add_merchantkey", lambda p: p["merchant_no"], _key_describe,
                                             _key_apply),
}


def _check_person(*, spec: KindSpec, payload: dict, user, doing: str) -> None:
    from apps.merchants.models import Merchant

    if not getattr(user, "pk", None) or not user.has_perm(spec.permission):
        raise StaffRequestRefused(f"{getattr(user, 'username', 'nobody')} may not {doing} this kind of request.")
    merchant_no = spec.merchant_no(payload)
    if merchant_no and Merchant.objects.filter(merchant_no=merchant_no, administrators=user).exists():
        raise StaffRequestRefused(f"{user.get_username()} administers merchant {merchant_no} and may not "
                                  f"{doing} its requests.")


@transaction.atomic(durable=True)
def staff_request_create(*, kind: str, payload: dict, requested_by, reason: str) -> StaffRequest:
    """Ask for a change; nothing moves until someone else approves it."""
    spec = KINDS[kind]
    if not reason.strip():
        raise StaffRequestRefused("a reason is required.")
    _check_person(spec=spec, payload=payload, user=requested_by, doing="ask for")
    request = StaffRequest.objects.create(kind=kind, payload=payload, summary=spec.describe(payload)[:255],
                                          reason=reason.strip(), requested_by=requested_by)
    audit.record(actor=requested_by, action="staff_request.create", obj=request, reason=request.reason,
                 new={"kind": kind, "summary": request.summary, "status": request.status})
    return request


def _lock_pending(request_id: int, approver) -> StaffRequest:
    request = StaffRequest.objects.select_for_update().filter(pk=request_id).first()
    if request is None:
        raise StaffRequestRefused(f"no staff request {request_id}")
    if request.status != StaffRequest.Status.PENDING:
        raise StaffRequestRefused(f"request #{request.pk} is already {request.get_status_display().lower()}.")
    if request.requested_by_id == getattr(approver, "pk", None):
        raise StaffRequestRefused(f"{approver.get_username()} asked for request #{request.pk}: a second person "
                                  f"must decide it.")
    return request


@transaction.atomic(durable=True)
def staff_request_approve(*, request_id: int, approver, reason: str) -> StaffRequest:
    """A second person says yes: the effect runs through the owning service in this transaction (a refusal of the
    service — bounds, state — rolls everything back and the request stays pending)."""
    if not reason.strip():
        raise StaffRequestRefused("a reason is required to approve a request.")
    request = _lock_pending(request_id, approver)
    spec = KINDS[request.kind]
    _check_person(spec=spec, payload=request.payload, user=approver, doing="approve")
    result = spec.apply(payload=request.payload, actor=approver,
                        reason=f"{request.reason} (request #{request.pk} by {request.requested_by.get_username()}, "
                               f"approved by {approver.get_username()}: {reason.strip()})")
    request.status = StaffRequest.Status.APPROVED
    request.decided_by, request.decided_at, request.decision_reason = approver, timezone.now(), reason.strip()
    request.result = {k: v for k, v in result.items() if isinstance(v, (str, int, bool, type(None)))}
    request.save(update_fields=["status", "decided_by", "decided_at", "decision_reason", "result"])
    audit.record(actor=approver, action="staff_request.approve", obj=request, reason=request.decision_reason,
                 old={"status": StaffRequest.Status.PENDING},
                 new={"status": request.status, "requested_by": request.requested_by.get_username(), **request.result})
    return request


@transaction.atomic(durable=True)
def staff_request_reject(*, request_id: int, approver, reason: str) -> StaffRequest:
    if not reason.strip():
        raise StaffRequestRefused("a reason is required to reject a request.")
    request = _lock_pending(request_id, approver)
    _check_person(spec=KINDS[request.kind], payload=request.payload, user=approver, doing="reject")
    request.status = StaffRequest.Status.REJECTED
    request.decided_by, request.decided_at, request.decision_reason = approver, timezone.now(), reason.strip()
    request.save(update_fields=["status", "decided_by", "decided_at", "decision_reason"])
    audit.record(actor=approver, action="staff_request.reject", obj=request, reason=request.decision_reason,
                 old={"status": StaffRequest.Status.PENDING}, new={"status": request.status})
    return request
