"""Claim and record of one callback attempt through the ORM: the path on SQLite (the embedded development default).

The PostgreSQL path (apps.callbacks.services) packs each step into one or two statements with data-modifying CTEs
and `FOR UPDATE OF`, which SQLite has not. This path keeps the same rules with plain ORM statements inside one
transaction each: lease a due event, bulkhead count under the merchant's row lock, close a lost attempt, write
the attempt row; record the outcome on the locked event, where a late result of a lost lease only marks the event
delivered. No draining and no parking at enqueue: one task per event. tests/callbacks/test_portable_path.py runs
it on PostgreSQL so it does not rot.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.callbacks import services
from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.callbacks.transport import post_callback
from apps.merchants.models import Merchant

logger = logging.getLogger(__name__)


@transaction.atomic(durable=True)
def callback_attempt_claim_portable(*, event_id: int):
    """Lease a due PENDING event and write its attempt row; None when it is not due, done, leased, or refused a
    slot by the bulkhead (then it waits with `dispatched_at` unset)."""
    now = timezone.now()
    event = (
        CallbackEvent.objects.select_for_update(of=("self",)).select_related("merchant")
        .filter(pk=event_id, status=CallbackEvent.Status.PENDING, next_attempt_at__lte=now)
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lte=now))
        .first()
    )
    if event is None:
        return None
    Merchant.objects.select_for_update().filter(pk=event.merchant_id).values_list("pk", flat=True).first()
    in_flight = CallbackEvent.objects.filter(merchant_id=event.merchant_id, locked_until__gt=now).count()
    if in_flight >= settings.CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT:
        event.dispatched_at = None
        event.save(update_fields=["dispatched_at"])
        return None
    if event.locked_until is not None:  # the lease of a previous attempt ran out: its worker died; it counted
        CallbackAttempt.objects.filter(event=event, finished_at__isnull=True).update(
            finished_at=now, error=services.LOST_ERROR)
    event.url = services.callback_url_for(merchant=event.merchant, type=event.type)
    body, key_version = services.callback_body_sign(payload=event.payload, now=now)
    manual = event.resend_requested
    event.attempts_count += 1
    event.locked_until = now + timedelta(seconds=services.lease_seconds())
    event.dispatched_at = None
    event.resend_requested = False
    event.save(update_fields=["url", "attempts_count", "locked_until", "dispatched_at", "resend_requested"])
    attempt = CallbackAttempt.objects.create(event=event, number=event.attempts_count, manual=manual, started_at=now,
                                             url=event.url, key_version=key_version, request_body=body)
    return services.Claim(event.pk, attempt.pk, attempt.number, event.url, body, manual, event.merchant_id)


@transaction.atomic(durable=True)
def callback_attempt_record_portable(*, claim, http_status: int | None, reply: str, error: str, duration_ms: int,
                                     success: bool) -> CallbackEvent:
    """Store the outcome of a claimed attempt; schedule the next one from the end of this one, or go dead."""
    now = timezone.now()
    event = CallbackEvent.objects.select_for_update().get(pk=claim.event_id)
    attempt_error = "" if success else (error or "failed")
    CallbackAttempt.objects.filter(pk=claim.attempt_id).update(
        finished_at=now, duration_ms=duration_ms, http_status=http_status, response_excerpt=reply,
        error=attempt_error, success=success)
    if event.attempts_count != claim.number:  # our lease ran out and another worker took over: it owns the state
        if success and event.status != CallbackEvent.Status.DELIVERED:
            event.status, event.delivered_at, event.last_error = CallbackEvent.Status.DELIVERED, now, ""
            event.save(update_fields=["status", "delivered_at", "last_error"])
        return event
    event.locked_until = None
    if success:
        event.status, event.delivered_at, event.last_error = CallbackEvent.Status.DELIVERED, now, ""
        event.next_attempt_at = None
    else:
        event.last_error = attempt_error
        delay = services.next_delay(attempts_count=event.attempts_count, manual=claim.manual)
        if delay is None:
            event.status, event.next_attempt_at = CallbackEvent.Status.DEAD, None
            logger.warning("callback event %s (%s %s) is dead after %s attempts: %s", event.pk, event.type,
                           event.platform_order_no, event.attempts_count, attempt_error)
        else:
            event.next_attempt_at = now + timedelta(seconds=delay)
    event.save(update_fields=["status", "delivered_at", "last_error", "next_attempt_at", "locked_until"])
    return event


def callback_deliver_portable(*, event_id: int) -> CallbackEvent | None:
    """One attempt at an event (no transaction open during the HTTP call), then hand a free slot to the merchant's
    next waiting event."""
    claim = callback_attempt_claim_portable(event_id=event_id)
    if claim is None:
        return None
    result = post_callback(claim.url, claim.body)
    if not result.success:
        logger.info("callback event %s attempt %s failed: %s", event_id, claim.number, result.error)
    event = callback_attempt_record_portable(claim=claim, http_status=result.http_status, reply=result.reply,
                                             error=result.error, duration_ms=result.duration_ms,
                                             success=result.success)
    services.dispatch_waiting(merchant_id=event.merchant_id, now=timezone.now(), slots=1)
    return event
