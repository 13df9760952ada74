"""Celery entry points of the callback outbox; thin wrappers around the services."""

from celery import shared_task

from apps.callbacks import services


@shared_task(acks_late=True, ignore_result=True)
def deliver_callback(event_id: int) -> None:
    """Make one attempt at a due event. Idempotent: a duplicate or late message finds nothing to claim."""
    services.callback_deliver(event_id=event_id)


@shared_task(acks_late=True, ignore_result=True)
def sweep_due_deliveries() -> None:
    """Beat, every 5 s: dispatch due or lost deliveries and record the sweeper heartbeat."""
    services.callbacks_sweep()
