"""A merchant user's access recovery as a staff request (docs/staff-access.md, "Recovering a merchant user's
access"): asked for on the admin's merchant users page, applied by apps.portal.recovery when a second, independent
person approves it (apps.common.staff_requests)."""

from apps.common.models import StaffRequest
from apps.common.staff_requests import ChangeLine, StaffRequestKind, StaffRequestRefused, staff_request_kind_register
from apps.portal import recovery

RECOVER_PERMISSION = "portal.recover_access"


def _describe(payload: dict) -> str:
    try:
        return recovery.recovery_describe(payload)
    except recovery.RecoveryRefused as exc:
        raise StaffRequestRefused(str(exc)) from None


def _changes(payload: dict) -> list[ChangeLine]:
    try:
        return [ChangeLine(subject=subject, field=field, current=current, new=new)
                for subject, field, current, new in recovery.recovery_changes(payload)]
    except recovery.RecoveryRefused as exc:
        raise StaffRequestRefused(str(exc)) from None


def _apply(*, payload: dict, actor, reason: str) -> dict:
    try:
        return recovery.recovery_apply(payload=payload, actor=actor, reason=reason)
    except recovery.RecoveryRefused as exc:
        raise StaffRequestRefused(str(exc)) from None


staff_request_kind_register(StaffRequest.Kind.ACCESS_RECOVERY, StaffRequestKind(
    permission=RECOVER_PERMISSION, describe=_describe, changes=_changes, apply=_apply, conflict=recovery.recovery_conflict))
