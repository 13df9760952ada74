"""Callback outbox, manual re-send (contract §6): an operator asks for one more attempt at a dead or delivered event."""

from django.db import transaction
from django.utils import timezone

from apps.callbacks.enqueue import callback_dispatch
from apps.callbacks.models import CallbackEvent
from apps.common import audit

RESENDABLE = (CallbackEvent.Status.DEAD, CallbackEvent.Status.DELIVERED)


@transaction.atomic(durable=True)
def callback_resend(*, event_ids: list[int], actor) -> list[CallbackEvent]:
    """One extra attempt now at each dead or delivered event; nothing else is reset (attempts keep counting, a
    failure makes the event dead again at once). Pending events are left alone: they are being retried already."""
    now = timezone.now()
    events = list(CallbackEvent.objects.select_for_update().filter(pk__in=event_ids, status__in=RESENDABLE)
                  .order_by("pk"))
    for event in events:
        old = {"status": event.status, "attempts_count": event.attempts_count}
        event.status = CallbackEvent.Status.PENDING
        event.next_attempt_at = now
        event.dispatched_at = now
        event.resend_requested = True
        event.save(update_fields=["status", "next_attempt_at", "dispatched_at", "resend_requested"])
        audit.record(actor=actor, action="callback.resend", obj=event, old=old,
                     new={"status": event.status, "next_attempt_at": now.isoformat()})
        transaction.on_commit(lambda pk=event.pk: callback_dispatch(event_id=pk))
    return events
