"""Callback outbox (contract §6): enqueue inside the order's transaction; deliver in three short steps.

Delivery of one attempt: claim (short transaction: lease the event, build and sign the body, write the
attempt row), commit, POST outside any transaction, then record the outcome (second short transaction).
Retry delays live in the database (`next_attempt_at`), swept by `callbacks_sweep`; never in broker countdowns.
"""

import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Q
from django.utils import timezone

from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.callbacks.transport import post_callback
from apps.common import audit, signing
from apps.merchants.models import Merchant, PlatformKey
from apps.merchants.selectors import platform_key_current, platform_private_key

logger = logging.getLogger(__name__)

# Added fresh to every attempt (interface §6); a business payload may not carry them.
SIGNING_FIELDS = ("key_version", "timestamp", "nonce", "sign_type", "sign")
HEARTBEAT_NAME = "callbacks.sweeper"

_EVENT = CallbackEvent._meta.db_table
_ATTEMPT = CallbackAttempt._meta.db_table


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
    transaction.on_commit(lambda: callback_dispatch_new(event_id=event.pk, merchant_id=merchant.pk))
    return event


# After commit: park the new event, i.e. leave it waiting (`dispatched_at` NULL) instead of queuing a task, when the
# merchant already has as many tasks queued and not yet started as bulkhead slots. Each of those tasks, when it has
# made its attempt, goes on with the merchant's waiting events (callback_deliver), and the record of that attempt runs
# after this statement has committed (a queued task has not claimed its event yet, and an HTTP call lies between
# claim and record); the sweeper queues any waiting event at its next run in any case.
_PARK = f"""
WITH queued AS (
    SELECT count(*) AS n FROM {_EVENT}
    WHERE merchant_id = %(merchant)s AND id <> %(event)s AND status = 'pending' AND dispatched_at > %(requeue_before)s
      AND next_attempt_at <= %(now)s AND (locked_until IS NULL OR locked_until <= %(now)s)
)
UPDATE {_EVENT} e SET dispatched_at = NULL
FROM queued
WHERE e.id = %(event)s AND queued.n >= %(cap)s AND e.status = 'pending' AND e.dispatched_at IS NOT NULL
  AND (e.locked_until IS NULL OR e.locked_until <= %(now)s)
RETURNING e.id
"""


def callback_dispatch_new(*, event_id: int, merchant_id: int) -> bool:
    """After the enqueueing commit: queue a delivery task, unless enough of the merchant's tasks are queued to take
    the event on (then it is parked as waiting). Never raises: on any error the task is queued, as without parking."""
    if connection.vendor != "postgresql":
        return callback_dispatch(event_id=event_id)  # the portable path does not park (apps.callbacks.portable)
    now = timezone.now()
    try:
        with connection.cursor() as cursor:
            cursor.execute(_PARK, {
                "event": event_id, "merchant": merchant_id, "now": now,
                "cap": settings.CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT,
                "requeue_before": now - timedelta(seconds=settings.CALLBACK_REDISPATCH_SECONDS)})
            if cursor.fetchone() is not None:
                return False
    except Exception:  # noqa: BLE001 - the order is committed; fall back to one task per event
        logger.exception("callback event %s: parking check failed; queuing a task", event_id)
    return callback_dispatch(event_id=event_id)


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
    merchant_id: int | None = None


def lease_seconds() -> float:
    """Seconds a claimed attempt holds its event's lease (CALLBACK_LEASE_SECONDS, floored at 3 × timeout + 30)."""
    # Longer than any single attempt can take (connect + read timeouts, plus the body read), so a live worker
    # never loses its lease; short enough that a lost worker delays the callback by minutes at most.
    return max(settings.CALLBACK_LEASE_SECONDS, 3 * settings.CALLBACK_TIMEOUT_SECONDS + 30)


def callback_body_sign(*, payload: dict, now: datetime, key: PlatformKey | None = None) -> tuple[dict, int]:
    """The body of one attempt: business fields + fresh signing fields, signed with the current platform key
    (`key`: the current key as the claim read it; otherwise it is looked up)."""
    key = key or platform_key_current()
    if key is None:
        raise RuntimeError("no current platform key: run `manage.py bootstrap`")
    body = {**payload, "key_version": key.version, "timestamp": int(now.timestamp()),
            "nonce": signing.new_nonce(), "sign_type": signing.SIGN_TYPE}
    body["sign"] = signing.sign(platform_private_key(key), body)  # parsed once per process and key (cached)
    return body, key.version


# The error written on an attempt whose lease ran out before its worker recorded the outcome.
LOST_ERROR = "worker lost before recording the outcome (lease expired)"

# Claim, step 1 (in the claim's transaction): the merchant's row lock, which makes the bulkhead's count-then-lease
# atomic (the count runs in the next statement, so it sees every lease committed before the lock was granted); the
# event if it looks due and unleased (step 2 checks again on the locked row); the merchant's URL at attempt time;
# the current platform key, read with it so that a rotation takes effect at the next attempt.
_CLAIM_READ = f"""
SELECT e.merchant_id, e.type, e.payload, e.resend_requested,
       m.collection_callback_url, m.payout_callback_url, k.version, k.private_key_encrypted
FROM {_EVENT} e
JOIN {Merchant._meta.db_table} m ON m.id = e.merchant_id
LEFT JOIN {PlatformKey._meta.db_table} k ON k.is_current
WHERE e.id = %(event)s AND e.status = 'pending' AND e.next_attempt_at <= %(now)s
  AND (e.locked_until IS NULL OR e.locked_until <= %(now)s)
FOR UPDATE OF m
"""

# Claim, step 2 (same transaction, merchant row locked): count the merchant's live leases; lease the event if it is
# still due and unleased on its latest row version (a racing claimer finds it leased) and a slot is free; close the
# attempt of a worker whose lease ran out (it counted); write this attempt's row with the exact body to be sent.
_CLAIM_WRITE = f"""
WITH busy AS (
    SELECT count(*) AS n FROM {_EVENT} WHERE merchant_id = %(merchant)s AND locked_until > %(now)s
), claimed AS (
    UPDATE {_EVENT} e
    SET url = %(url)s, attempts_count = e.attempts_count + 1, locked_until = %(lease)s, dispatched_at = NULL,
        resend_requested = false
    FROM busy
    WHERE e.id = %(event)s AND busy.n < %(cap)s AND e.status = 'pending' AND e.next_attempt_at <= %(now)s
      AND (e.locked_until IS NULL OR e.locked_until <= %(now)s) AND e.resend_requested = %(manual)s
    RETURNING e.id, e.attempts_count
), lost AS (
    UPDATE {_ATTEMPT} a SET finished_at = %(now)s, error = %(lost)s
    FROM claimed WHERE a.event_id = claimed.id AND a.finished_at IS NULL
), attempt AS (
    INSERT INTO {_ATTEMPT} (event_id, number, manual, started_at, duration_ms, url, key_version, request_body,
                            response_excerpt, error, success)
    SELECT id, attempts_count, %(manual)s, %(now)s, 0, %(url)s, %(key_version)s, %(body)s::jsonb, '', '', false
    FROM claimed
    RETURNING id, number
)
SELECT busy.n, attempt.id, attempt.number FROM busy LEFT JOIN attempt ON true
"""

_REFUSE = f"""
UPDATE {_EVENT} SET dispatched_at = NULL
WHERE id = %(event)s AND status = 'pending' AND (locked_until IS NULL OR locked_until <= %(now)s)
"""

# The merchant's next event waiting for a task (`dispatched_at` NULL: parked at enqueue, refused by the bulkhead, or a
# retry come due), oldest due first: the one a draining task claims next (callback_attempt_claim_next).
def _waiting_sql(merchant: str, other_than: str = "") -> str:
    return f"""
SELECT w.id FROM {_EVENT} w
WHERE w.merchant_id = {merchant}{f" AND w.id <> {other_than}" if other_than else ""} AND w.status = 'pending'
  AND w.dispatched_at IS NULL AND w.next_attempt_at <= %(now)s AND (w.locked_until IS NULL OR w.locked_until <= %(now)s)
ORDER BY w.next_attempt_at, w.id LIMIT 1
"""


_WAITING = _waiting_sql("%(merchant)s")

# Claim-next, step 1: as _CLAIM_READ, for the merchant's next waiting event. The merchant row is returned (and locked)
# even when nothing waits, so that the caller can look again holding the lock (see callback_attempt_claim_next).
_CLAIM_READ_NEXT = f"""
SELECT e.id, m.id, e.type, e.payload, e.resend_requested,
       m.collection_callback_url, m.payout_callback_url, k.version, k.private_key_encrypted
FROM {Merchant._meta.db_table} m
LEFT JOIN {_EVENT} e ON e.id = ({_WAITING})
LEFT JOIN {PlatformKey._meta.db_table} k ON k.is_current
WHERE m.id = %(merchant)s
FOR UPDATE OF m
"""

_NOT_CLAIMED, _REFUSED = object(), object()


def _claim_write(cursor, *, now: datetime, event_id: int, merchant_id: int, event_type: str, payload: Any,
                 manual: bool, collection_url: str, payout_url: str, key_version: int | None,
                 key_encrypted: Any) -> Claim | object:
    """Claim, step 2 (merchant row locked): sign the body, then lease the event and write the attempt row."""
    if key_version is None:
        raise RuntimeError("no current platform key: run `manage.py bootstrap`")
    # The merchant's URL at attempt time, not the one frozen at enqueue (a fixed URL is used at the next attempt).
    url = collection_url if event_type == CallbackEvent.Type.COLLECTION_SUCCESS else payout_url
    payload = json.loads(payload) if isinstance(payload, str) else payload
    body, _ = callback_body_sign(payload=payload, now=now, key=PlatformKey(
        version=key_version, private_key_encrypted=key_encrypted))
    cursor.execute(_CLAIM_WRITE, {
        "event": event_id, "merchant": merchant_id, "now": now, "url": url, "manual": manual,
        "lease": now + timedelta(seconds=lease_seconds()), "cap": settings.CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT,
        "lost": LOST_ERROR, "key_version": key_version, "body": json.dumps(body)})
    busy, attempt_id, number = cursor.fetchone()
    if attempt_id is None:
        if busy >= settings.CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT:
            # Bulkhead: one merchant's slow endpoint may hold at most CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT worker
            # slots, so it cannot delay other merchants' callbacks. The event waits for a slot: the merchant's
            # busy tasks take it when they finish an attempt (or the sweeper, after a loss).
            cursor.execute(_REFUSE, {"event": event_id, "now": now})
            return _REFUSED
        return _NOT_CLAIMED  # another worker leased it first (or a re-send queued it again meanwhile)
    return Claim(event_id, attempt_id, number, url, body, manual, merchant_id)


@transaction.atomic(durable=True)
def callback_attempt_claim(*, event_id: int) -> Claim | None:
    """Lease a due PENDING event and write its attempt row; None when it is not due, done, or leased."""
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM_READ, {"event": event_id, "now": now})
        row = cursor.fetchone()
        if row is None:
            return None
        merchant_id, event_type, payload, manual, collection_url, payout_url, key_version, key_encrypted = row
        claim = _claim_write(cursor, now=now, event_id=event_id, merchant_id=merchant_id, event_type=event_type,
                             payload=payload, manual=manual, collection_url=collection_url, payout_url=payout_url,
                             key_version=key_version, key_encrypted=key_encrypted)
    return claim if isinstance(claim, Claim) else None


@transaction.atomic(durable=True)
def callback_attempt_claim_next(*, merchant_id: int) -> Claim | None:
    """Lease the merchant's next waiting event (oldest due first) and write its attempt row; None when nothing waits
    or the bulkhead is full."""
    now = timezone.now()
    with connection.cursor() as cursor:
        # The first read's snapshot may predate the merchant lock it waited for, so the event it names may have been
        # leased meanwhile (by another of the merchant's tasks), or another one parked; look again holding the lock.
        for _ in range(3):
            cursor.execute(_CLAIM_READ_NEXT, {"merchant": merchant_id, "now": now})
            row = cursor.fetchone()
            if row is None:
                return None  # no such merchant
            event_id, _, event_type, payload, manual, collection_url, payout_url, key_version, key_encrypted = row
            if event_id is None:
                continue
            claim = _claim_write(cursor, now=now, event_id=event_id, merchant_id=merchant_id, event_type=event_type,
                                 payload=payload, manual=manual, collection_url=collection_url,
                                 payout_url=payout_url, key_version=key_version, key_encrypted=key_encrypted)
            if claim is _REFUSED:
                return None  # the merchant's busy tasks take the waiting events when they finish
            if isinstance(claim, Claim):
                return claim
    return None


def next_delay(*, attempts_count: int, manual: bool) -> int | None:
    """Seconds until the next attempt after a failed one, or None: the event is dead (contract §6)."""
    delays = settings.CALLBACK_RETRY_DELAYS_SECONDS
    if manual or attempts_count > len(delays):
        return None
    return delays[attempts_count - 1]


_EVENT_COLUMNS = [f for f in CallbackEvent._meta.concrete_fields if f.name != "payload"]

# The outcome in one statement (atomic on its own): the attempt row, then the event. `current` is true while the
# event's attempts_count is still this attempt's number; otherwise our lease ran out and another worker took over:
# it owns the event's state, and a late success only marks the event delivered. The updated event row is locked
# by the UPDATE itself; under READ COMMITTED the CASEs are evaluated on its latest version. Also returns the
# merchant's next event waiting for a task, if any (the task takes it on, or hands it over at its bound).
_RECORD = f"""
WITH done AS (
    UPDATE {_ATTEMPT}
    SET finished_at = %(now)s, duration_ms = %(duration_ms)s, http_status = %(http_status)s,
        response_excerpt = %(reply)s, error = %(error)s, success = %(success)s
    WHERE id = %(attempt)s
)
UPDATE {_EVENT} e SET
    locked_until = CASE WHEN e.attempts_count = %(number)s THEN NULL ELSE e.locked_until END,
    status = CASE WHEN e.attempts_count = %(number)s THEN COALESCE(%(status)s, e.status)
                  WHEN %(success)s THEN 'delivered' ELSE e.status END,
    delivered_at = CASE WHEN %(success)s AND (e.attempts_count = %(number)s OR e.status <> 'delivered')
                        THEN %(now)s ELSE e.delivered_at END,
    last_error = CASE WHEN e.attempts_count = %(number)s THEN %(error)s
                      WHEN %(success)s AND e.status <> 'delivered' THEN '' ELSE e.last_error END,
    next_attempt_at = CASE WHEN e.attempts_count = %(number)s THEN %(next_attempt_at)s ELSE e.next_attempt_at END
WHERE e.id = %(event)s
RETURNING {", ".join(f"e.{f.column}" for f in _EVENT_COLUMNS)}, ({_waiting_sql("e.merchant_id", other_than="e.id")})
"""


def callback_attempt_record(*, claim: Claim, http_status: int | None, reply: str, error: str, duration_ms: int,
                            success: bool) -> CallbackEvent:
    """Store the outcome of a claimed attempt; schedule the next one from the end of this one, or go dead."""
    return _record(claim=claim, http_status=http_status, reply=reply, error=error, duration_ms=duration_ms,
                   success=success)[0]


def _record(*, claim: Claim, http_status: int | None, reply: str, error: str, duration_ms: int,
            success: bool) -> tuple[CallbackEvent, int | None]:
    now = timezone.now()
    attempt_error = "" if success else (error or "failed")
    status, next_attempt_at = CallbackEvent.Status.DELIVERED, None
    if not success:
        delay = next_delay(attempts_count=claim.number, manual=claim.manual)
        status = CallbackEvent.Status.DEAD if delay is None else None  # None: stays pending
        next_attempt_at = None if delay is None else now + timedelta(seconds=delay)
    with connection.cursor() as cursor:
        cursor.execute(_RECORD, {
            "now": now, "attempt": claim.attempt_id, "event": claim.event_id, "number": claim.number,
            "duration_ms": duration_ms, "http_status": http_status, "reply": reply, "error": attempt_error,
            "success": success, "status": status, "next_attempt_at": next_attempt_at})
        *values, waiting_id = cursor.fetchone()
    event = CallbackEvent.from_db(connection.alias, [f.attname for f in _EVENT_COLUMNS], values)
    if event.attempts_count == claim.number and event.status == CallbackEvent.Status.DEAD and not success:
        logger.warning("callback event %s (%s %s) is dead after %s attempts: %s", event.pk, event.type,
                       event.platform_order_no, event.attempts_count, attempt_error)
    return event, waiting_id


def _attempt(claim: Claim) -> tuple[CallbackEvent, int | None]:
    """POST a claimed attempt (no transaction open) and record its outcome; also the merchant's next waiting event."""
    result = post_callback(claim.url, claim.body)
    if not result.success:
        logger.info("callback event %s attempt %s failed: %s", claim.event_id, claim.number, result.error)
    return _record(claim=claim, http_status=result.http_status, reply=result.reply, error=result.error,
                   duration_ms=result.duration_ms, success=result.success)


def callback_deliver(*, event_id: int, max_events: int = 1, max_seconds: float | None = None) -> CallbackEvent | None:
    """One attempt at an event, if it is due and not leased by another worker; then, while the merchant has waiting
    events and up to `max_events` attempts and `max_seconds` in all, attempts at those (one lease at a time, so the
    bulkhead holds). At the bound, the merchant's next waiting event gets a task of its own. No transaction is open
    during an HTTP call. Returns the first event (None if it could not be claimed). Not on PostgreSQL (SQLite, the
    embedded default): one attempt through the ORM (apps.callbacks.portable)."""
    if connection.vendor != "postgresql":
        from apps.callbacks.portable import callback_deliver_portable

        return callback_deliver_portable(event_id=event_id)
    claim = callback_attempt_claim(event_id=event_id)
    if claim is None:
        return None
    merchant_id = claim.merchant_id
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    first, waiting_id = _attempt(claim)
    done = 1
    while waiting_id is not None:
        if done >= max_events or (deadline is not None and time.monotonic() >= deadline):
            # At the bound: the task ends and the merchant's next waiting event is queued behind other merchants'
            # tasks, so a merchant with a backlog takes turns with the others.
            _mark_and_dispatch(event_id=waiting_id, now=timezone.now())
            break
        claim = callback_attempt_claim_next(merchant_id=merchant_id)
        if claim is None:
            break  # taken by the merchant's other tasks, or its bulkhead slots are all busy
        _, waiting_id = _attempt(claim)
        done += 1
    return first


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


def dispatch_waiting(*, merchant_id: int, now: datetime, slots: int) -> None:
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
