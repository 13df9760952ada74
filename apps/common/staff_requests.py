"""Four eyes for staff changes in the admin (docs/back-office.md): a payout reversal, a balance adjustment or a
merchant key upload is first a StaffRequest; it takes effect only when a second person with the right role
approves it, and then through the owning app's service, in the approval's one transaction with the audit rows.

This module is the mechanism only; it knows no domain. Each domain registers its own kind of request from its
`staff_requests.py` (imported by its AppConfig.ready()): payout the reversal, ledger the balance adjustment,
merchants the key upload; and the money settings each domain owns (channels, bank codes, currencies, products,
merchants, the deny list) through apps.common.setting_changes.

Four eyes means two independent people: an approver whom the requester controls, who controls the requester, or who
shares a controller with them is refused (apps.common.independence, docs/staff-access.md, "Independence").

The CLI (docs/api.md, "Operations CLI") calls the services directly: a shell on the server is the highest authority,
and its operator is recorded (`--operator`).
"""

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any, Callable

import pghistory
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from apps.common import audit
from apps.common.independence import independence_conflict
from apps.common.models import StaffRequest
from apps.common.retry import retry_conflicts


class StaffRequestRefused(ValueError):
    """The requester/approver, the role, the reason or the request's state do not allow it; nothing changed."""


@dataclass(frozen=True)
class ChangeLine:
    """One field of what a request changes, as the approver reads it: its value now and the value approval sets,
    in words (a secret only as "replaced" / "cleared", never in clear)."""

    subject: str  # what is changed: "channel XENDIT_PHP_PAYIN", "new channel", "merchant M100001 (PHP)"
    field: str  # "bank codes", "secret key", "available balance"
    current: str  # the value now, read when the line is made ("" when the object does not exist yet)
    new: str  # the value once approved
    detail: str = ""  # what a long value gains and loses ("added: BDO; removed: GCASH"), or how a sum is made
    asked: str | None = None  # the value when the request was made, only when it has moved since (else None)


@dataclass(frozen=True)
class StaffRequestKind:
    """One kind of staff request, as its domain registers it."""

    permission: str  # needed both to ask for it and to approve it
    # One short line for the request list and the audit trail (which fields, and that credentials change, not every
    # value); raises StaffRequestRefused for a bad payload.
    describe: Callable[[dict], str]
    # The whole change, field by field, against the values stored now: read on the request page and the approval
    # page, and again inside the approval's transaction (staff_request_changes). Raises StaffRequestRefused when the
    # request can no longer apply.
    changes: Callable[[dict], list[ChangeLine]]
    apply: Callable[..., dict]  # (payload, actor, reason) -> result, inside the approval's transaction
    # Why this person may neither ask for nor decide this request ("" when nothing stands in the way), e.g.
    # "administers merchant M100001": a merchant's own administrator never handles its money or keys.
    conflict: Callable[[dict, Any], str]
    # The page that asks for this kind from the staff request list's "Add" (request, context) -> response, made by
    # its domain (the balance adjustment's, apps/ledger/admin_views.py); None for a kind asked for on the page of
    # what it changes (a reversal on the payout list, a key upload on the merchant key page).
    request_page: Callable[[Any, dict], Any] | None = None


KINDS: dict[str, StaffRequestKind] = {}


def staff_request_kind_register(kind: str, spec: StaffRequestKind) -> None:
    """Called once per kind from the owning domain's AppConfig.ready(); the kinds themselves are the model's
    choices (a migration of apps.common), so a registry cannot invent one."""
    if kind not in StaffRequest.Kind.values:
        raise ImproperlyConfigured(f"{kind!r} is not a StaffRequest.Kind")
    if kind in KINDS:
        raise ImproperlyConfigured(f"staff request kind {kind!r} is registered twice")
    KINDS[kind] = spec


def _check_person(*, spec: StaffRequestKind, payload: dict, user, doing: str) -> None:
    if not getattr(user, "pk", None) or not user.has_perm(spec.permission):
        raise StaffRequestRefused(f"{getattr(user, 'username', 'nobody')} may not {doing} this kind of request.")
    conflict = spec.conflict(payload, user)
    if conflict:
        raise StaffRequestRefused(f"{user.get_username()} {conflict} and may not {doing} its requests.")


@transaction.atomic(durable=True)
def staff_request_create(*, kind: str, payload: dict, requested_by, reason: str) -> StaffRequest:
    """Ask for a change; nothing moves until someone else approves it."""
    spec = KINDS[kind]
    if not reason.strip():
        raise StaffRequestRefused("a reason is required.")
    _check_person(spec=spec, payload=payload, user=requested_by, doing="ask for")
    summary = spec.describe(payload)
    lines = spec.changes(payload)
    request = StaffRequest.objects.create(kind=kind, payload=payload, summary=summary, reason=reason.strip(),
                                          requested_by=requested_by)
    audit.record(actor=requested_by, action="staff_request.create", obj=request, reason=request.reason,
                 new={"kind": kind, "summary": request.summary, "status": request.status,
                      "changes": [asdict(line) for line in lines]})
    return request


def staff_request_changes(request: StaffRequest) -> list[ChangeLine]:
    """What approving `request` would change now, field by field, against the values stored now (raises
    StaffRequestRefused when it can no longer apply). A decided request: the lines recorded when it was approved."""
    if request.status != StaffRequest.Status.PENDING:
        return [ChangeLine(**line) for line in (request.result or {}).get("changes", [])]
    return KINDS[request.kind].changes(request.payload)


def staff_request_changes_digest(lines: list[ChangeLine]) -> str:
    """A fingerprint of the change an approver read: approval with it applies only that very change. What each line
    sets and whether the value it replaces moved since the request; not the values now, which a balance changes by
    every payment without changing what the request does."""
    read = [[line.subject, line.field, line.new, line.asked] for line in lines]
    return hashlib.sha256(json.dumps(read).encode()).hexdigest()


def _lock_pending(request_id: int, approver) -> StaffRequest:
    request = StaffRequest.objects.select_for_update().filter(pk=request_id).first()
    if request is None:
        raise StaffRequestRefused(f"no staff request {request_id}")
    if request.status != StaffRequest.Status.PENDING:
        raise StaffRequestRefused(f"request #{request.pk} is already {request.get_status_display().lower()}.")
    if request.requested_by_id == getattr(approver, "pk", None):
        raise StaffRequestRefused(f"{approver.get_username()} asked for request #{request.pk}: a second person "
                                  f"must decide it.")
    # Two people, not two accounts: neither controls the other, nor does a third account control both
    # (docs/staff-access.md, "Independence").
    conflict = independence_conflict(request.requested_by, approver)
    if conflict:
        raise StaffRequestRefused(f"{conflict}. Request #{request.pk} needs two independent people.")
    return request


@retry_conflicts
@transaction.atomic(durable=True)
def staff_request_approve(*, request_id: int, approver, reason: str, seen: str | None = None) -> StaffRequest:
    """A second person says yes: the effect runs through the owning service in this transaction (a refusal of the
    service — bounds, state — rolls everything back and the request stays pending). `seen`: the digest of the
    change as the approver read it (staff_request_changes_digest); when the change reads otherwise now (a value it
    replaces moved since the page was shown), nothing is applied and the approver reads it again."""
    if not reason.strip():
        raise StaffRequestRefused("a reason is required to approve a request.")
    request = _lock_pending(request_id, approver)
    spec = KINDS[request.kind]
    _check_person(spec=spec, payload=request.payload, user=approver, doing="approve")
    lines = spec.changes(request.payload)
    if seen is not None and staff_request_changes_digest(lines) != seen:
        raise StaffRequestRefused(f"request #{request.pk} reads differently now than when you opened it (a value "
                                  f"it changes moved since): read it again before you decide.")
    # Both people in the settings trail of whatever the approval changes (apps.common.history.event_who).
    with pghistory.context(user=approver.pk, username=approver.get_username(), staff_request=request.pk,
                           requested_by=request.requested_by.get_username()):
        result = spec.apply(payload=request.payload, actor=approver,
                            reason=f"{request.reason} (request #{request.pk} by {request.requested_by.get_username()}, "
                                   f"approved by {approver.get_username()}: {reason.strip()})")
    request.status = StaffRequest.Status.APPROVED
    request.decided_by, request.decided_at, request.decision_reason = approver, timezone.now(), reason.strip()
    request.result = {k: v for k, v in result.items() if isinstance(v, (str, int, bool, type(None)))}
    # What was applied, as the approver read it: the request page shows these lines once it is decided.
    request.result["changes"] = [asdict(line) for line in lines]
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
