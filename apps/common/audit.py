"""Audit trail: call inside the transaction that makes the change."""

from typing import Any

from apps.common.models import AuditLog


def record(*, actor, action: str, obj, old: dict[str, Any] | None = None, new: dict[str, Any] | None = None,
           reason: str = "", actor_label: str | None = None) -> AuditLog:
    user = actor if getattr(actor, "pk", None) else None
    return AuditLog.objects.create(
        actor=user,
        actor_label=actor_label or (user.get_username() if user else "system"),
        action=action,
        object_type=obj._meta.label_lower,
        object_id=str(obj.pk),
        old=old or {},
        new=new or {},
        reason=reason,
    )
