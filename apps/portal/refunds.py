"""Refunds asked for in the portal (docs/portal.md, "Refunds"): a finance user or an owner asks for a refund of a paid
pay-in (the maker), an owner independent of them approves it with a fresh code (the checker), and only then is the
refund made, through `refund_create` exactly as the API's refund/create (docs/api.md, "Refunds"), with the
`mch_refund_no` the request was given when it was made: a request approved twice, or processed twice, is one refund.

`actor` is the signed-in merchant user's membership: `.user`, `.merchant` (every lookup is scoped to it), `.role`.
"""

import logging
from datetime import timedelta

from django.core.exceptions import ObjectDoesNotExist
from django.db import transaction
from django.utils import timezone

from apps.collection.models import CollectionOrder, random_alphanumerics
from apps.collection.refunds import refund_create, refund_refusal_now
from apps.common import audit
from apps.common.errors import DomainError, ErrorCode
from apps.common.independence import maker_checker_refusal
from apps.common.step_up import second_factor_confirm
from apps.common.stranded import STRANDED_FINISHED, StrandedKind
from apps.merchants.models import Merchant
from apps.portal.models import RefundRequest, Role
from apps.portal.recovery import recovery_cooling_refusal

logger = logging.getLogger(__name__)

MAKER_ROLES = (Role.FINANCE, Role.OWNER)
CHECKER_ROLES = (Role.OWNER,)
REASON_MAX = 256  # refund/create's `reason`


class RefundRefused(PermissionError):
    """The role, the request's state, the maker-checker rule or the order does not allow it; nothing changed. `code`
    is the contract's error code when the refusal is one (2007, 2008, 2003), else ""."""

    def __init__(self, message: str, code: str = ""):
        super().__init__(message)
        self.code = code


class RefundRequestNotFound(LookupError):
    """No such request of this merchant (another merchant's request is not found too)."""


def new_portal_refund_no() -> str:
    """The mch_refund_no of a refund asked for in the portal: 'portal-' + 20 random alphanumerics, so that it never
    meets a number the merchant's own system gives its API refunds by chance."""
    return "portal-" + random_alphanumerics(20)


def _require(actor, roles: tuple[str, ...], what: str) -> None:
    if actor.role not in roles:
        raise RefundRefused(f"Only {' or '.join(roles)} users may {what}; you are {actor.role}.")
    if not Merchant.objects.filter(pk=actor.merchant.pk, is_active=True).exists():
        # refund_create does not look (the API's authentication answers 1105): the portal does, for the same rule.
        raise RefundRefused(f"Your merchant account is switched off: you cannot {what}. Contact our support.",
                            code=ErrorCode.MERCHANT_DISABLED.code)


def _refusal(error: DomainError) -> RefundRefused:
    return RefundRefused(f"{error.error.code}: {error.msg}", code=error.error.code)


# --- asking ---------------------------------------------------------------------------------------------------------


def refund_request_create(*, actor, platform_order_no: str, amount: int, reason: str) -> RefundRequest:
    """A finance user or an owner asks for a refund of one of the merchant's paid pay-ins. What refund_create would
    refuse now (2007, 2008, 2003) is refused here and nothing is stored; the approval asks refund_create itself."""
    _require(actor, MAKER_ROLES, "ask for refunds")
    reason = (reason or "").strip()
    if not reason:
        raise RefundRefused("Say why the payer gets the money back (the approver and your records read it).")
    if len(reason) > REASON_MAX:
        raise RefundRefused(f"The reason is at most {REASON_MAX} characters.")
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        raise RefundRefused("The amount must be more than zero.")
    order = CollectionOrder.objects.filter(merchant=actor.merchant, platform_order_no=platform_order_no).first()
    if order is None:
        raise RefundRequestNotFound(f"No pay-in {platform_order_no}.")
    if refusal := refund_refusal_now(order=order, amount=amount):
        raise _refusal(refusal)
    return _request_insert(actor=actor, order=order, amount=amount, reason=reason)


@transaction.atomic(durable=True)
def _request_insert(*, actor, order: CollectionOrder, amount: int, reason: str) -> RefundRequest:
    request = RefundRequest.objects.create(merchant=actor.merchant, order=order, mch_refund_no=new_portal_refund_no(),
                                           currency=order.currency_id, amount=amount, reason=reason,
                                           created_by=actor.user)
    audit.record(actor=actor.user, action="portal.refund_request", obj=request,
                 new={"merchant_no": actor.merchant.merchant_no, "platform_order_no": order.platform_order_no,
                      "mch_refund_no": request.mch_refund_no, "currency": order.currency_id, "amount": amount},
                 reason=reason)
    return request


# --- deciding -------------------------------------------------------------------------------------------------------


def _request(*, actor, request_id: int, lock: bool = False) -> RefundRequest:
    # Locked: the row alone. Joined rows would be read as of the statement's snapshot, not as of the lock's wait (a
    # concurrent approver's decided_by would read as NULL), so the people are read after the lock is held.
    requests = RefundRequest.objects.select_for_update() if lock else RefundRequest.objects.select_related(
        "created_by", "decided_by", "order")
    request = requests.filter(pk=request_id, merchant=actor.merchant).first()
    if request is None:
        raise RefundRequestNotFound(f"No refund request #{request_id}.")
    return request


def _pending(request: RefundRequest) -> None:
    if request.status != RefundRequest.Status.PENDING:
        raise RefundRefused(f"Refund request #{request.pk} is {request.get_status_display().lower()} already"
                            + (f" (by {request.decided_by.get_username()})" if request.decided_by_id else "") + ".")


def _maker_still_may_ask(request: RefundRequest) -> None:
    """A waiting request lives only as long as its maker's right to ask for it, as a payout batch does (docs/portal.md,
    "Maker-checker and independence")."""
    try:
        maker = request.created_by.merchant_user
    except ObjectDoesNotExist:
        maker = None
    if (maker is None or maker.merchant_id != request.merchant_id or not maker.is_active
            or not request.created_by.is_active or maker.role not in MAKER_ROLES):
        raise RefundRefused(f"{request.created_by.get_username()}, who asked for this refund, can no longer ask for "
                            "refunds (switched off, or another role): it cannot be approved. Reject it, and ask again "
                            "as a person who may.")


def _checker_independent(actor, request: RefundRequest) -> None:
    """The approver is another person than the maker, by the one independence rule (apps.common.independence)."""
    if refusal := maker_checker_refusal(maker=request.created_by, checker_user=actor.user, what="refund"):
        raise RefundRefused(refusal)


def refund_checker_problem(*, actor, request: RefundRequest) -> str:
    """Why this owner may not approve this request ("" when they may): for the page, before any code is asked."""
    try:
        _maker_still_may_ask(request)
        _checker_independent(actor, request)
    except RefundRefused as exc:
        return str(exc)
    return ""


def _check_approval(actor, request: RefundRequest) -> None:
    _pending(request)
    _maker_still_may_ask(request)
    _checker_independent(actor, request)


def refund_request_approve(*, actor, request_id: int, otp_code: str) -> RefundRequest:
    """An owner independent of the maker, not in a cooling-off, approves a waiting request with a fresh code: decided
    once, under the request's row lock (of two approvals at once, one approves, the other is told). The refund is
    then made by refund_request_process, after the decision commits; the request returned carries its result."""
    _require(actor, CHECKER_ROLES, "approve refunds")
    if cooling := recovery_cooling_refusal(user_id=actor.user.pk, doing="approve refunds"):
        raise RefundRefused(cooling)
    request = _request(actor=actor, request_id=request_id)
    _check_approval(actor, request)  # everything that needs no code first: a refusal never spends it
    if refusal := refund_refusal_now(order=request.order, amount=request.amount):
        raise _refusal(refusal)  # it would be refused now: the request stays waiting, the code unspent
    second_factor_confirm(user=actor.user, code=otp_code)  # committed on its own: a wrong code is counted
    _approve(actor=actor, request_id=request_id)
    return refund_request_process(request_id=request_id)


@transaction.atomic(durable=True)
def _approve(*, actor, request_id: int) -> RefundRequest:
    request = _request(actor=actor, request_id=request_id, lock=True)
    _check_approval(actor, request)
    request.status, request.decided_by, request.decided_at = (RefundRequest.Status.APPROVED, actor.user,
                                                              timezone.now())
    request.save(update_fields=["status", "decided_by", "decided_at"])
    audit.record(actor=actor.user, action="portal.refund_approve", obj=request,
                 new={"status": request.status, "mch_refund_no": request.mch_refund_no, "amount": request.amount,
                      "maker": request.created_by.get_username()})
    return request


def refund_request_process(*, request_id: int) -> RefundRequest:
    """Make the refund of an approved request through refund_create, then record its result in a second transaction.
    Safe to run again and twice at once (a lost request, the sweep): refund_create answers the request's
    mch_refund_no with the refund it already made."""
    request = RefundRequest.objects.select_related("merchant", "order").get(pk=request_id)
    if request.status != RefundRequest.Status.APPROVED:
        return request
    if not request.merchant.is_active:  # switched off since the approval: refunded by nobody, as its API calls
        return _record(request_id=request_id, refund=None, error=(
            ErrorCode.MERCHANT_DISABLED.code, "Your merchant account was switched off before the refund was made."))
    try:
        refund = refund_create(merchant=request.merchant, platform_order_no=request.order.platform_order_no,
                               mch_refund_no=request.mch_refund_no, amount=request.amount, reason=request.reason)
    except DomainError as exc:
        return _record(request_id=request_id, refund=None, error=(exc.error.code, exc.msg))
    return _record(request_id=request_id, refund=refund, error=None)


@transaction.atomic(durable=True)
def _record(*, request_id: int, refund, error: tuple[str, str] | None) -> RefundRequest:
    request = RefundRequest.objects.select_for_update().get(pk=request_id)
    if request.status != RefundRequest.Status.APPROVED:
        return request  # a concurrent processor recorded it: its result stands
    if refund is not None:
        request.status, request.refund = RefundRequest.Status.DONE, refund
    else:
        request.status, request.error_code, request.error_msg = RefundRequest.Status.FAILED, error[0], error[1]
    request.finished_at = timezone.now()
    request.save(update_fields=["status", "refund", "error_code", "error_msg", "finished_at"])
    audit.record(actor=None, actor_label="system", action="portal.refund_done", obj=request,
                 new={"status": request.status, "refund_no": refund.refund_no if refund else "",
                      "error_code": request.error_code})
    return request


@transaction.atomic(durable=True)
def refund_request_reject(*, actor, request_id: int, reason: str) -> RefundRequest:
    """An owner rejects a waiting request (nothing is refunded); it moves nothing, so one person decides it, as a
    payout batch's rejection."""
    if actor.role not in CHECKER_ROLES:
        raise RefundRefused(f"Only owner users may reject refunds; you are {actor.role}.")
    reason = (reason or "").strip()
    if not reason:
        raise RefundRefused("Say why you reject it (the person who asked reads it).")
    request = _request(actor=actor, request_id=request_id, lock=True)
    _pending(request)
    return _close(actor=actor, request=request, status=RefundRequest.Status.REJECTED, reason=reason[:500],
                  action="portal.refund_reject")


@transaction.atomic(durable=True)
def refund_request_withdraw(*, actor, request_id: int) -> RefundRequest:
    """The person who asked takes a waiting request back (nothing is refunded)."""
    request = _request(actor=actor, request_id=request_id, lock=True)
    if request.created_by_id != actor.user.pk:
        raise RefundRefused("Only the person who asked for a refund may withdraw it; an owner may reject it.")
    _pending(request)
    return _close(actor=actor, request=request, status=RefundRequest.Status.WITHDRAWN, reason="withdrawn",
                  action="portal.refund_withdraw")


def _close(*, actor, request: RefundRequest, status: str, reason: str, action: str) -> RefundRequest:
    request.status, request.decided_by, request.decided_at, request.decision_reason = (
        status, actor.user, timezone.now(), reason)
    request.save(update_fields=["status", "decided_by", "decided_at", "decision_reason"])
    audit.record(actor=actor.user, action=action, obj=request, new={"status": status}, reason=reason)
    return request


# --- the sweep ------------------------------------------------------------------------------------------------------

RESUME_AFTER = timedelta(minutes=2)


def refund_requests_approved_unrecorded(now):
    """Approved requests whose refund was not recorded RESUME_AFTER after the approval: the request that approved
    them died between its two transactions (refund_requests_resume finishes them)."""
    return RefundRequest.objects.filter(status=RefundRequest.Status.APPROVED, decided_at__lt=now - RESUME_AFTER)


# Counted on the operations overview and in payments_stuck_orders (apps/operations/selectors.py, stranded_orders).
REFUND_REQUEST_STRANDED = [
    StrandedKind("refund_request.unrecorded", "Portal refund approved, refund not made", "portal.refundrequest",
                 "decided_at", refund_requests_approved_unrecorded, finisher="resume_refund_requests"),
]


def refund_requests_resume(*, now=None) -> list[int]:
    """Process every approved request left without its result; refund_create replays a refund already made."""
    ids = list(refund_requests_approved_unrecorded(now or timezone.now()).values_list("pk", flat=True)[:200])
    for request_id in ids:
        refund_request_process(request_id=request_id)
    if ids:
        STRANDED_FINISHED.labels("refund_request.unrecorded").inc(len(ids))
        logger.warning("%d approved refund requests resumed", len(ids))
    return ids


__all__ = ["RefundRefused", "RefundRequestNotFound", "refund_checker_problem", "refund_request_approve",
           "refund_request_create", "refund_request_process", "refund_request_reject", "refund_request_withdraw",
           "refund_requests_resume"]
