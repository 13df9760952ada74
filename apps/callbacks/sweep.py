"""Callback outbox, the sweeper (docs/api.md, "Callbacks"), run by beat every 5 s: it closes the attempts of workers
that were lost (their lease ran out), then queues every due event no task was queued for recently: a retry come due, a
task lost with its message or never queued (broker down at commit), an event waiting for a bulkhead slot. Retry delays
therefore live in the database (`next_attempt_at`), never in broker countdowns."""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Q, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from apps.callbacks.deliver import event_delivered, lease_seconds, schedule_after_failure
from apps.callbacks.enqueue import callback_dispatch
from apps.callbacks.models import ATTEMPT_CLOCK_MARGIN, CallbackAttempt, CallbackEvent
from apps.common.models import Heartbeat

logger = logging.getLogger(__name__)

HEARTBEAT_NAME = "callbacks.sweeper"
# The error of an attempt whose lease ran out before its worker recorded the outcome.
LOST_ERROR = "worker lost before recording the outcome (lease expired)"


def callbacks_sweep(*, now: datetime | None = None, limit: int = 500) -> list[int]:
    """Close lost attempts, queue due events (no more per merchant than its free bulkhead slots) and record the
    sweeper's heartbeat (/healthz). Returns the ids queued."""
    now = now or timezone.now()
    lost = (CallbackEvent.objects.filter(status=CallbackEvent.Status.PENDING, locked_until__lte=now)
            .values_list("pk", flat=True)[:limit])
    for event_id in list(lost):
        callback_lease_expire(event_id=event_id, now=now)
    dispatched = _dispatch_due(now=now, limit=limit)
    Heartbeat.objects.update_or_create(name=HEARTBEAT_NAME, defaults={"beat_at": now})
    return dispatched


@transaction.atomic(durable=True)
def callback_lease_expire(*, event_id: int, now: datetime) -> CallbackEvent | None:
    """A lease that ran out: its worker was lost before recording the event's outcome. An attempt whose POST ended
    while others of its batch were in flight has its outcome on its row (callback_attempts_finish): that outcome is
    applied as the record would have (delivered, or the schedule from the attempt's end). One still in flight (the
    merchant may or may not have received the callback) counts as failed when the lease ran out; the schedule goes on
    from there, and after the ninth attempt the event is dead. None when the outcome was recorded meanwhile."""
    event = (CallbackEvent.objects.select_for_update()
             .filter(pk=event_id, status=CallbackEvent.Status.PENDING, locked_until__lte=now).first())
    if event is None:
        return None
    lost_at = event.locked_until
    # The attempt started when its worker took the lease (by the same clock): the bounds keep the read and the write
    # to the attempt's month (one partition, docs/callbacks.md, "Retention"), with room for a changed lease setting.
    attempts = CallbackAttempt.objects.filter(
        event=event, started_at__lt=lost_at + ATTEMPT_CLOCK_MARGIN,
        started_at__gte=lost_at - timedelta(seconds=lease_seconds()) - ATTEMPT_CLOCK_MARGIN)
    attempt = attempts.get(number=event.attempts_count)
    event.locked_until = None
    if attempt.finished_at is None:
        attempt.finished_at, attempt.error = lost_at, LOST_ERROR
        attempts.filter(pk=attempt.pk, started_at=attempt.started_at).update(finished_at=lost_at, error=LOST_ERROR)
    if attempt.success:
        event_delivered(event, attempt.finished_at)
    else:
        schedule_after_failure(event, number=attempt.number, manual=attempt.manual, error=attempt.error,
                               failed_at=attempt.finished_at)
    event.save(update_fields=["locked_until", "last_error", "status", "next_attempt_at", "delivered_at"])
    return event


def _dispatch_due(*, now: datetime, limit: int) -> list[int]:
    requeue_before = now - timedelta(seconds=settings.CALLBACK_REDISPATCH_SECONDS)
    not_queued = Q(dispatched_at__isnull=True) | Q(dispatched_at__lte=requeue_before)
    # At most a bulkhead's worth of each merchant's oldest due events: a dead merchant's backlog, older than anything
    # else, must not fill the `limit` and starve other merchants' retries (tests/callbacks/test_backlog_plan.py).
    # The window reads every due event once per sweep (every 5 s), not per delivery.
    per_merchant = Window(RowNumber(), partition_by=[F("merchant_id")], order_by=[F("next_attempt_at"), F("pk")])
    due = list(CallbackEvent.objects
               .filter(not_queued, status=CallbackEvent.Status.PENDING, next_attempt_at__lte=now,
                       locked_until__isnull=True)
               .annotate(rank=per_merchant).filter(rank__lte=settings.CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT)
               .order_by("next_attempt_at").values_list("pk", "merchant_id")[:limit])
    # No more per merchant than its free bulkhead slots: a slow merchant's backlog is not queued wholesale.
    busy = dict(CallbackEvent.objects.filter(merchant_id__in={m for _, m in due}, locked_until__gt=now)
                .values("merchant_id").annotate(n=Count("pk")).values_list("merchant_id", "n"))
    free = {m: settings.CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT - busy.get(m, 0) for _, m in due}
    dispatched = []
    for event_id, merchant_id in due:
        if free[merchant_id] <= 0:
            continue
        # Marked first, conditionally: an overlapping run (or a record's hand-off) does not queue it twice.
        if not CallbackEvent.objects.filter(not_queued, pk=event_id).update(dispatched_at=now):
            continue
        if callback_dispatch(event_id=event_id):  # broker down: queued again after CALLBACK_REDISPATCH_SECONDS
            free[merchant_id] -= 1
            dispatched.append(event_id)
    return dispatched
