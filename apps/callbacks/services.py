"""Callback outbox (contract §6): enqueue inside the order's transaction; deliver in three short steps.

Delivery of one attempt: claim (short transaction: lease the event, build and sign the body, write the
attempt row), commit, POST outside any transaction, then record the outcome (second short transaction).
Retry delays live in the database (`next_attempt_at`), swept by `callbacks_sweep`; never in broker countdowns.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.callbacks.transport import post_callback
from apps.common import audit, signing
from apps.merchants.models import Merchant
from apps.merchants.selectors import platform_key_current, platform_private_key

logger = logging.getLogger(__name__)

# Added fresh to every attempt (interface §6); a business payload may not carry them.
SIGNING_FIELDS = ("key_version", "timestamp", "nonce", "sign_type", "sign")
HEARTBEAT_NAME = "callbacks.sweeper"


# ------------------------------------------------------------------------------------------ payloads
# Business fields of each callback type (interface §6.1–§6.3). Pure functions on duck-typed orders, so the
# collection and payout services build identical shapes; signing fields are added per attempt.

def _unix(value: datetime) -> int:
    return int(value.timestamp())


def _currency_code(order: Any) -> str:
    code = getattr(order, "currency_id", None)
    if code:
        return code
    currency = order.currency
    return getattr(currency, "code", currency)


def _status(value: Any) -> str:
    return getattr(value, "value", value)


def collection_success_payload(order: Any) -> dict:
    """§6.1: status always SUCCESS; `attach` always present (empty string when the order has none)."""
    return {
        "platform_order_no": order.platform_order_no,
        "mch_order_no": order.mch_order_no,
        "amount": int(order.amount),
        "currency": _currency_code(order),
        "status": "SUCCESS",
        "paid_at": _unix(order.paid_at),
        "attach": getattr(order, "attach", "") or "",
    }


def payout_terminal_payload(payout: Any) -> dict:
    """§6.2: a terminal snapshot; no finished_at, no attach; fail_reason only on FAILED/REJECTED."""
    status = _status(payout.status)
    if status not in ("SUCCESS", "FAILED", "REJECTED"):
        raise ValueError(f"payout {payout.platform_order_no} is not terminal ({status})")
    body = {
        "platform_order_no": payout.platform_order_no,
        "mch_order_no": payout.mch_order_no,
        "amount": int(payout.amount),
        "fee": int(payout.fee),
        "currency": _currency_code(payout),
        "status": status,
    }
    if status in ("FAILED", "REJECTED"):
        body["fail_reason"] = getattr(payout, "fail_reason", "") or ""
    return body


def payout_reversed_payload(payout: Any) -> dict:
    """§6.3: `event` = payout.reversed and no `status` (merchants route on `event`)."""
    return {
        "event": "payout.reversed",
        "reversed_at": _unix(payout.reversed_at),
        "platform_order_no": payout.platform_order_no,
        "mch_order_no": payout.mch_order_no,
        "amount": int(payout.amount),
        "fee": int(payout.fee),
        "currency": _currency_code(payout),
        "reversal_amount": int(payout.reversal_amount),
        "fee_refund": int(payout.fee_refund),
    }


def _check_payload(payload: dict) -> None:
    reserved = sorted(set(payload) & set(SIGNING_FIELDS))
    if reserved:
        raise ValueError(f"callback payload may not carry signing fields {reserved}")
    for value in payload.values():
        if value is not None:
            signing.render_value(value)  # flat values only: objects, arrays, floats cannot be signed


# ------------------------------------------------------------------------------------------- enqueue

def callback_url_for(*, merchant: Merchant, type: str) -> str:
    if type == CallbackEvent.Type.COLLECTION_SUCCESS:
        return merchant.collection_callback_url
    return merchant.payout_callback_url


def callback_enqueue(*, merchant: Merchant, type: CallbackEvent.Type, platform_order_no: str,
                     payload: dict) -> CallbackEvent:
    """Write the event in the caller's transaction; a second enqueue of the same (order, type) is a no-op."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("callback_enqueue must run inside the transaction that changes the order")
    _check_payload(payload)
    now = timezone.now()
    try:
        with transaction.atomic():
            event = CallbackEvent.objects.create(
                merchant=merchant, type=type, platform_order_no=platform_order_no,
                url=callback_url_for(merchant=merchant, type=type), payload=payload,
                next_attempt_at=now, dispatched_at=now,
            )
    except IntegrityError:
        return CallbackEvent.objects.get(platform_order_no=platform_order_no, type=type)
    transaction.on_commit(lambda: callback_dispatch(event_id=event.pk))
    return event


def callback_dispatch(*, event_id: int) -> bool:
    """Queue a delivery task; a broker outage is logged, not raised: the sweeper re-dispatches later."""
    from apps.callbacks.tasks import deliver_callback

    try:
        deliver_callback.delay(event_id)
    except Exception as exc:  # noqa: BLE001 - broker down: the event stays due in the database
        logger.warning("callback event %s not dispatched (%s); the sweeper will retry", event_id, type(exc).__name__)
        return False
    return True


# ------------------------------------------------------------------------------------------ delivery

@dataclass
class Claim:
    event_id: int
    attempt_id: int
    number: int
    url: str
    body: dict
    manual: bool = False  # a re-send from the admin: one extra attempt, dead again if it fails


def _lease_seconds() -> float:
    # Longer than any single attempt can take (connect + read timeouts, plus the body read), so a live worker
    # never loses its lease; short enough that a lost worker delays the callback by minutes at most.
    return max(settings.CALLBACK_LEASE_SECONDS, 3 * settings.CALLBACK_TIMEOUT_SECONDS + 30)


def callback_body_sign(*, payload: dict, now: datetime) -> tuple[dict, int | None]:
    """The body of one attempt: business fields + fresh signing fields, signed with the current platform key."""
    key = platform_key_current()
    if key is None:
        raise RuntimeError("no current platform key: run `manage.py bootstrap`")
    body = {**payload, "key_version": key.version, "timestamp": int(now.timestamp()),
            "nonce": signing.new_nonce(), "sign_type": signing.SIGN_TYPE}
    body["sign"] = signing.sign(platform_private_key(key), body)
    return body, key.version


@transaction.atomic(durable=True)
def callback_attempt_claim(*, event_id: int) -> Claim | None:
    """Lease a due PENDING event and write its attempt row; None when it is not due, done, or leased."""
    now = timezone.now()
    # skip_locked: a second worker racing for the same event gets nothing instead of waiting for the first.
    event = (
        CallbackEvent.objects.select_for_update(skip_locked=True, of=("self",)).select_related("merchant")
        .filter(pk=event_id, status=CallbackEvent.Status.PENDING, next_attempt_at__lte=now)
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lte=now))
        .first()
    )
    if event is None:
        return None
    # Bulkhead: one merchant's slow endpoint may hold at most CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT worker slots,
    # so it cannot delay other merchants' callbacks. The merchant row lock makes count-then-lease atomic.
    Merchant.objects.select_for_update().filter(pk=event.merchant_id).values_list("pk", flat=True).first()
    in_flight = CallbackEvent.objects.filter(merchant_id=event.merchant_id, locked_until__gt=now).count()
    if in_flight >= settings.CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT:
        # Waits for a slot: the merchant's next finishing attempt hands it over (or the sweeper, after a loss).
        event.dispatched_at = None
        event.save(update_fields=["dispatched_at"])
        return None
    if event.locked_until is not None:
        # The lease of a previous attempt ran out (recording clears it): its worker died. Close it; it counted.
        CallbackAttempt.objects.filter(event=event, finished_at__isnull=True).update(
            finished_at=now, error="worker lost before recording the outcome (lease expired)")
    event.url = callback_url_for(merchant=event.merchant, type=event.type)  # the merchant's URL at attempt time
    body, key_version = callback_body_sign(payload=event.payload, now=now)
    manual = event.resend_requested
    event.attempts_count += 1
    event.locked_until = now + timedelta(seconds=_lease_seconds())
    event.dispatched_at = None
    event.resend_requested = False
    event.save(update_fields=["url", "attempts_count", "locked_until", "dispatched_at", "resend_requested"])
    attempt = CallbackAttempt.objects.create(event=event, number=event.attempts_count, manual=manual, started_at=now,
                                             url=event.url, key_version=key_version, request_body=body)
    return Claim(event.pk, attempt.pk, attempt.number, event.url, body, manual)


def _next_delay(*, attempts_count: int, manual: bool) -> int | None:
    """Seconds until the next attempt after a failed one, or None: the event is dead (contract §6)."""
    delays = settings.CALLBACK_RETRY_DELAYS_SECONDS
    if manual or attempts_count > len(delays):
        return None
    return delays[attempts_count - 1]


@transaction.atomic(durable=True)
def callback_attempt_record(*, claim: Claim, http_status: int | None, reply: str, error: str, duration_ms: int,
                            success: bool) -> CallbackEvent:
    """Store the outcome of a claimed attempt; schedule the next one from the end of this one, or go dead."""
    now = timezone.now()
    event = CallbackEvent.objects.select_for_update().get(pk=claim.event_id)
    # The attempt row is this worker's own (written by its claim); the event's lock covers it.
    attempt_error = "" if success else (error or "failed")
    CallbackAttempt.objects.filter(pk=claim.attempt_id).update(
        finished_at=now, duration_ms=duration_ms, http_status=http_status, response_excerpt=reply,
        error=attempt_error, success=success)
    if event.attempts_count != claim.number:
        # Our lease ran out and another worker took over: it owns the event's state now.
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
        delay = _next_delay(attempts_count=event.attempts_count, manual=claim.manual)
        if delay is None:
            event.status, event.next_attempt_at = CallbackEvent.Status.DEAD, None
            logger.warning("callback event %s (%s %s) is dead after %s attempts: %s", event.pk, event.type,
                           event.platform_order_no, event.attempts_count, attempt_error)
        else:
            event.next_attempt_at = now + timedelta(seconds=delay)
    event.save(update_fields=["status", "delivered_at", "last_error", "next_attempt_at", "locked_until"])
    return event


def callback_deliver(*, event_id: int) -> CallbackEvent | None:
    """One attempt at an event, if it is due and not leased by another worker. No transaction is open during
    the HTTP call."""
    claim = callback_attempt_claim(event_id=event_id)
    if claim is None:
        return None
    result = post_callback(claim.url, claim.body)
    if not result.success:
        logger.info("callback event %s attempt %s failed: %s", event_id, claim.number, result.error)
    event = callback_attempt_record(claim=claim, http_status=result.http_status, reply=result.reply,
                                    error=result.error, duration_ms=result.duration_ms, success=result.success)
    _dispatch_waiting(merchant_id=event.merchant_id, now=timezone.now(), slots=1)
    return event


def _due_unleased(now: datetime):
    return (CallbackEvent.objects.filter(status=CallbackEvent.Status.PENDING, next_attempt_at__lte=now)
            .filter(Q(locked_until__isnull=True) | Q(locked_until__lte=now)))


def _mark_and_dispatch(*, event_id: int, now: datetime, requeue_before: datetime | None = None) -> bool:
    """Queue one event unless another process queued it since it was read (the mark is a conditional update)."""
    not_queued = Q(dispatched_at__isnull=True)
    if requeue_before is not None:
        not_queued |= Q(dispatched_at__lte=requeue_before)
    if CallbackEvent.objects.filter(not_queued, pk=event_id).update(dispatched_at=now):
        return callback_dispatch(event_id=event_id)
    return False


def _dispatch_waiting(*, merchant_id: int, now: datetime, slots: int) -> None:
    """Queue up to `slots` of a merchant's due events that were refused a slot by the bulkhead."""
    waiting = (_due_unleased(now).filter(merchant_id=merchant_id, dispatched_at__isnull=True)
               .order_by("next_attempt_at").values_list("pk", flat=True)[:slots])
    for event_id in list(waiting):
        _mark_and_dispatch(event_id=event_id, now=now)


# ------------------------------------------------------------------------------------- sweep, re-send

def callbacks_sweep(*, now: datetime | None = None, limit: int = 500) -> list[int]:
    """Dispatch every due PENDING event with no live lease that was not queued recently (lost task, broker
    down at commit, retry come due); record the sweeper's heartbeat. Returns the dispatched ids."""
    from apps.common.models import Heartbeat

    now = now or timezone.now()
    requeue_before = now - timedelta(seconds=settings.CALLBACK_REDISPATCH_SECONDS)
    due = list(
        _due_unleased(now).filter(Q(dispatched_at__isnull=True) | Q(dispatched_at__lte=requeue_before))
        .order_by("next_attempt_at").values_list("pk", "merchant_id")[:limit]
    )
    # No more per merchant than its free bulkhead slots: a slow merchant's backlog is not re-queued wholesale.
    busy = dict(CallbackEvent.objects.filter(merchant_id__in={m for _, m in due}, locked_until__gt=now)
                .values("merchant_id").annotate(n=Count("pk")).values_list("merchant_id", "n"))
    free = {m: settings.CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT - busy.get(m, 0) for _, m in due}
    dispatched = []
    for event_id, merchant_id in due:
        if free[merchant_id] <= 0:
            continue
        # Mark first: a second sweeper run (or beat overlap) does not queue it again right away.
        if _mark_and_dispatch(event_id=event_id, now=now, requeue_before=requeue_before):
            free[merchant_id] -= 1
            dispatched.append(event_id)
    Heartbeat.objects.update_or_create(name=HEARTBEAT_NAME, defaults={"beat_at": now})
    return dispatched


RESENDABLE = (CallbackEvent.Status.DEAD, CallbackEvent.Status.DELIVERED)


@transaction.atomic(durable=True)
def callback_resend(*, event_ids: list[int], actor) -> list[CallbackEvent]:
    """Manual re-send of dead or delivered events: one extra attempt now, nothing else reset (contract §6).
    Pending events are left alone (they are already being retried)."""
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
