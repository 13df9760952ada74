"""Celery entry points of the callback outbox; each calls one service and takes an id, never an object."""

from celery import shared_task

from apps.callbacks import deliver, sweep


@shared_task(acks_late=True, ignore_result=True)
def deliver_callback(event_id: int) -> None:
    """One attempt at a due event. Idempotent: a duplicate, early or late message finds nothing to claim."""
    deliver.callback_deliver(event_id=event_id)


@shared_task(acks_late=True, ignore_result=True)
def sweep_due_deliveries() -> None:
    """Beat, every 5 s: close lost attempts, queue due deliveries and record the sweeper heartbeat."""
    sweep.callbacks_sweep()
