"""Callback attempts by month (docs/callbacks.md, "Retention"): kept CALLBACK_ATTEMPT_RETENTION_MONTHS, but a month
holding an attempt of a pending event, whose last attempt the sweeper may still need to read and finish
(apps.callbacks.sweep.callback_lease_expire)."""

from datetime import datetime

from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.common.partitions import PartitionedTable, partitioned_table_register


def _attempts_still_needed(start: datetime, end: datetime) -> str | None:
    pending = (CallbackAttempt.objects.filter(started_at__gte=start, started_at__lt=end,
                                              event__status=CallbackEvent.Status.PENDING)
               .values_list("event_id", flat=True).first())
    return None if pending is None else f"it holds an attempt of pending callback event {pending}"


partitioned_table_register(PartitionedTable(model=CallbackAttempt, key="started_at",
                                            retention_setting="CALLBACK_ATTEMPT_RETENTION_MONTHS",
                                            still_needed=_attempts_still_needed))
