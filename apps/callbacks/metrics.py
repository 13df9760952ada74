"""Prometheus metrics of callback delivery, counted by the worker that made the attempt (per process unless
PROMETHEUS_MULTIPROC_DIR is set; docs/runbook.md, "Metrics and alerts")."""

from prometheus_client import Counter, Histogram

from apps.callbacks.models import CallbackEvent

CALLBACK_ATTEMPTS = Counter("payments_callback_attempts", "Callback delivery attempts by outcome.", ["outcome"])
CALLBACK_DELIVERY_SECONDS = Histogram(
    "payments_callback_delivery_seconds", "From enqueue (event created) to its first delivery.",
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600))


def attempt_counted(*, event: CallbackEvent, success: bool, first_delivery: bool = True) -> None:
    """Count one recorded attempt: delivered, failed (another attempt is scheduled) or dead (the last one). The
    delivery time is observed once per event, at its first delivery: a re-send of a delivered event is an attempt,
    not another delivery (it would add the event's age, hours or days, to the histogram)."""
    if success:
        CALLBACK_ATTEMPTS.labels("delivered").inc()
        if first_delivery and event.delivered_at and event.created_at:
            CALLBACK_DELIVERY_SECONDS.observe(max(0.0, (event.delivered_at - event.created_at).total_seconds()))
    elif event.status == CallbackEvent.Status.DEAD:
        CALLBACK_ATTEMPTS.labels("dead").inc()
    else:
        CALLBACK_ATTEMPTS.labels("failed").inc()
