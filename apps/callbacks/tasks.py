from celery import shared_task


@shared_task(acks_late=True)
def deliver_callback(event_id: int) -> None:
    """Deliver one callback event (implemented in the callbacks issue)."""


@shared_task
def sweep_due_deliveries() -> None:
    """Re-dispatch due or lost deliveries (implemented in the callbacks issue)."""
