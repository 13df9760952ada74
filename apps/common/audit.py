"""Audit trail: call inside the transaction that makes the change."""

import contextvars
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.db import models
from django.utils import timezone

from apps.common.models import AuditLog

# The hosts that write audit rows stamp them by their own clocks: a bound drawn from another row's time leaves this
# much room (the audit is partitioned by month of created_at: docs/architecture.md, "Partitioned history").
CLOCK_MARGIN = timedelta(hours=1)

# The person running a management command (docs/api.md, "Operations CLI": `--operator`, else the OS user), set by
# JsonCommand for the command's duration; every row the command writes without a user is labelled "cli:<operator>".
_cli_operator: contextvars.ContextVar[str | None] = contextvars.ContextVar("cli_operator", default=None)


@contextmanager
def cli_operator(name: str):
    token = _cli_operator.set(name)
    try:
        yield
    finally:
        _cli_operator.reset(token)


def cli_label(label: str) -> str:
    """'cli' → 'cli:<operator>' while a command runs for a named operator; any other label unchanged."""
    operator = _cli_operator.get()
    return f"cli:{operator}" if label == "cli" and operator else label


def record(*, actor, action: str, obj, old: dict[str, Any] | None = None, new: dict[str, Any] | None = None,
           reason: str = "", actor_label: str | None = None) -> AuditLog:
    user = actor if getattr(actor, "pk", None) else None
    return AuditLog.objects.create(
        actor=user,
        actor_label=cli_label(actor_label) if actor_label else (user.get_username() if user else "system"),
        action=action,
        object_type=obj._meta.label_lower,
        object_id=str(obj.pk),
        old=old or {},
        new=new or {},
        reason=reason,
    )


def trail(obj: models.Model, *, since: datetime) -> models.QuerySet:
    """The audit rows of `obj`, created at `since` (the object's own creation) or later: bounded on both sides, so
    PostgreSQL reads the months since then only, not every month the retention keeps."""
    return AuditLog.objects.filter(object_type=obj._meta.label_lower, object_id=str(obj.pk),
                                   created_at__gte=since - CLOCK_MARGIN, created_at__lt=timezone.now() + CLOCK_MARGIN)
