"""Celery entry points of the callback outbox; thin wrappers around the services."""

from celery import shared_task
from django.conf import settings

from apps.callbacks import services


@shared_task(acks_late=True, ignore_result=True)
def deliver_callback(event_id: int) -> None:
    """Make one attempt at a due event, then at the same merchant's waiting events, bounded by count and time.
    Idempotent: a duplicate or late message finds nothing to claim."""
    services.callback_deliver(event_id=event_id, max_events=settings.CALLBACK_DRAIN_MAX_EVENTS,
                              max_seconds=settings.CALLBACK_DRAIN_MAX_SECONDS)


@shared_task(acks_late=True, ignore_result=True)
def sweep_due_deliveries() -> None:
    """Beat, every 5 s: dispatch due or lost deliveries and record the sweeper heartbeat."""
    services.callbacks_sweep()
