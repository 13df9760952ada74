"""Callback outbox, delivery phase (contract §6): one attempt at an event, in three steps.

Claim (a short transaction: lease the event, sign the body, write the attempt row), POST outside any transaction
(apps.callbacks.transport), record (a second short transaction: the outcome on the attempt and on the event:
delivered, the next attempt counted from the end of this one, or dead). Anything that goes wrong between claim and
record is a failed attempt on the schedule; a worker lost in between leaves its lease, which the sweeper closes as
a failed attempt (apps.callbacks.sweep).

Bulkhead: a merchant holds at most CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT leases at once, so a slow endpoint cannot
take the worker slots other merchants' callbacks need. Claim and record both lock the merchant's row: the count and
the lease are one step, and a slot freed by a record goes to the merchant's next waiting event.
"""

import logging
import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Func, Subquery
from django.db.models.lookups import LessThan
from django.utils import timezone

from apps.callbacks.enqueue import callback_dispatch, callback_url_for
from apps.callbacks.metrics import attempt_counted
from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.callbacks.transport import PostResult, post_callback
from apps.common import signing
from apps.common.refcache import generation_subquery, refcache_scope
from apps.merchants.selectors import platform_key_current, platform_private_key

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Claim:
    """A leased event with its attempt row written: what the POST sends, and what the record needs."""

    event_id: int
    attempt_id: int
    number: int
    merchant_id: int
    url: str
    body: dict
    manual: bool  # a re-send from the admin: one extra attempt, dead again if it fails
    delivered_before: bool  # an earlier attempt succeeded (a re-send of a delivered event): not a first delivery


def lease_seconds() -> float:
    """Seconds a claimed attempt holds its event (CALLBACK_LEASE_SECONDS, floored at 3 × timeout + 30)."""
    # Longer than any attempt can take (the transport's deadline is the timeout), so a live worker never loses its
    # lease; short enough that a lost worker delays the callback by minutes at most.
    return max(settings.CALLBACK_LEASE_SECONDS, 3 * settings.CALLBACK_TIMEOUT_SECONDS + 30)


def next_delay(*, number: int, manual: bool) -> int | None:
    """Seconds from the end of failed attempt `number` to the next one, or None: the event is dead (contract §6:
    nine attempts; a manual re-send is a single one)."""
    delays = settings.CALLBACK_RETRY_DELAYS_SECONDS
    if manual or number > len(delays):
        return None
    return delays[number - 1]


def schedule_after_failure(event: CallbackEvent, *, number: int, manual: bool, error: str,
                           failed_at: datetime) -> None:
    """After failed attempt `number` (recorded, or its lease found lost): the next attempt after its delay, counted
    from the end of this one, or the event is dead (not saved here)."""
    event.last_error = error
    delay = next_delay(number=number, manual=manual)
    if delay is None:
        event.status, event.next_attempt_at = CallbackEvent.Status.DEAD, None
        logger.warning("callback event %s (%s %s) is dead after %s attempts: %s", event.pk, event.type,
                       event.platform_order_no, event.attempts_count, error)
    else:
        event.next_attempt_at = failed_at + timedelta(seconds=delay)


def callback_body_sign(*, payload: dict, now: datetime) -> tuple[dict, int]:
    """The body of one attempt: business fields + fresh signing fields, signed with the platform key that is
    current now (a rotation takes effect at the next attempt). Returns the body and the key's version."""
    key = platform_key_current()
    if key is None:
        raise RuntimeError("no current platform key: run `manage.py bootstrap`")
    body = {**payload, "key_version": key.version, "timestamp": int(now.timestamp()),
            "nonce": signing.new_nonce(), "sign_type": signing.SIGN_TYPE}
    body["sign"] = signing.sign(platform_private_key(key), body)
    return body, key.version


def _locked_events():
    """Events with their merchant, both locked in one statement, merchant first (the order of `of`, kept by
    PostgreSQL): the merchant's row serialises its claims and records (the bulkhead), the event's row its attempt.
    NO KEY UPDATE: orders and events that reference the merchant, and attempt rows that reference the event, can
    still be inserted meanwhile (a foreign key check takes KEY SHARE). A racing worker that waited for either lock
    gets the rows as the winner left them, and the filters are checked again on them (READ COMMITTED's recheck)."""
    return CallbackEvent.objects.select_related("merchant").select_for_update(of=("merchant", "self"), no_key=True)


@transaction.atomic(durable=True)
def callback_attempt_claim(*, event_id: int) -> Claim | None:
    """Lease a due, unleased PENDING event and write its attempt row with the exact body to be sent. None when it is
    not due, done, leased, or refused by the merchant's bulkhead (then it waits for a slot, `dispatched_at` unset).
    Three statements: the locks (with the reference generation), the lease, the attempt row."""
    now = timezone.now()
    # The reference generation is read in the same statement: the platform key is then served from the reference
    # cache for that generation without a statement of its own (apps.common.refcache, staleness rule).
    event = (_locked_events().annotate(reference_generation=generation_subquery())
             .filter(pk=event_id, status=CallbackEvent.Status.PENDING, next_attempt_at__lte=now,
                     locked_until__isnull=True).first())
    if event is None:
        return None
    merchant = event.merchant
    # The merchant's URL at attempt time, not the one at enqueue: a URL set or fixed later is used from now on.
    url = callback_url_for(merchant=merchant, type=event.type)
    number = event.attempts_count + 1
    # The bulkhead and the lease in one statement, which starts after the merchant's lock was granted, so its count
    # sees every lease of this merchant committed before (a count in the locking statement would not: its snapshot
    # is taken before it waits for the lock).
    leases = (CallbackEvent.objects.filter(merchant_id=merchant.pk, locked_until__gt=now).order_by()
              .annotate(n=Func(F("pk"), function="COUNT")).values("n"))
    leased = (CallbackEvent.objects.filter(pk=event.pk)
              .filter(LessThan(Subquery(leases), settings.CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT))
              .update(url=url, attempts_count=number, locked_until=now + timedelta(seconds=lease_seconds()),
                      dispatched_at=None, resend_requested=False))
    if not leased:
        # Waiting: the next record of this merchant, or the sweeper, queues it.
        CallbackEvent.objects.filter(pk=event.pk).update(dispatched_at=None)
        return None
    with refcache_scope(generation=event.reference_generation):
        body, key_version = callback_body_sign(payload=event.payload, now=now)
    manual = event.resend_requested
    attempt = CallbackAttempt.objects.create(event_id=event.pk, number=number, manual=manual, started_at=now,
                                             url=url, key_version=key_version, request_body=body)
    return Claim(event.pk, attempt.pk, number, merchant.pk, url, body, manual, event.delivered_at is not None)


_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(text: str) -> str:
    """Text PostgreSQL stores as it is: NUL and lone surrogates (which a reply's charset can produce) become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text.replace("\x00", "\ufffd"))


@transaction.atomic(durable=True)
def callback_attempt_record(*, claim: Claim, result: PostResult) -> CallbackEvent:
    """Store the outcome of a claimed attempt on its row and on the event: delivered, the next attempt counted from
    now (the end of this one), or dead; then hand the freed bulkhead slot to the merchant's next waiting event."""
    now = timezone.now()
    event = _locked_events().get(pk=claim.event_id)
    error = storable(result.error)
    CallbackAttempt.objects.filter(pk=claim.attempt_id).update(
        finished_at=now, duration_ms=result.duration_ms, http_status=result.http_status,
        response_excerpt=storable(result.reply), error=error, success=result.success)
    if event.attempts_count != claim.number or event.locked_until is None:
        # Our lease ran out and the sweeper counted this attempt as lost: the event's schedule is set. The merchant
        # did get a late success, though.
        if result.success and event.status != CallbackEvent.Status.DELIVERED:
            _delivered(event, now)
            event.save(update_fields=["status", "delivered_at", "next_attempt_at", "last_error"])
        return event
    event.locked_until = None
    if result.success:
        _delivered(event, now)
    elif event.status != CallbackEvent.Status.DELIVERED:  # else an earlier attempt, counted lost, arrived meanwhile
        schedule_after_failure(event, number=claim.number, manual=claim.manual, error=error, failed_at=now)
    event.save(update_fields=["locked_until", "status", "delivered_at", "next_attempt_at", "last_error"])
    _hand_off_slot(merchant_id=claim.merchant_id, now=now)
    return event


def _delivered(event: CallbackEvent, now: datetime) -> None:
    # `delivered_at` is the first success (docs/api.md §9): a re-send of a delivered event leaves it as it was.
    event.status, event.delivered_at, event.next_attempt_at, event.last_error = (
        CallbackEvent.Status.DELIVERED, event.delivered_at or now, None, "")


def _hand_off_slot(*, merchant_id: int, now: datetime) -> None:
    """Queue the merchant's oldest waiting event (due, unleased, no task queued), if any, after commit."""
    waiting = (CallbackEvent.objects
               .filter(merchant_id=merchant_id, status=CallbackEvent.Status.PENDING, next_attempt_at__lte=now,
                       locked_until__isnull=True, dispatched_at__isnull=True)
               .order_by("next_attempt_at", "pk").values_list("pk", flat=True).first())
    # Conditional: the sweeper may have queued it meanwhile.
    if waiting and CallbackEvent.objects.filter(pk=waiting, dispatched_at__isnull=True).update(dispatched_at=now):
        transaction.on_commit(lambda: callback_dispatch(event_id=waiting))


def callback_deliver(*, event_id: int) -> CallbackEvent | None:
    """One attempt at an event, if it is due, not leased by another worker and its merchant has a free slot. No
    transaction is open during the HTTP call. Returns the event as recorded (None if it could not be claimed)."""
    claim = callback_attempt_claim(event_id=event_id)
    if claim is None:
        return None
    started = time.monotonic()
    try:
        result = post_callback(claim.url, claim.body)
    except Exception as exc:  # noqa: BLE001 - a failed attempt on the schedule, never a lease left behind
        logger.exception("callback event %s attempt %s raised", claim.event_id, claim.number)
        result = PostResult(None, "", f"the attempt failed unexpectedly: {exc or 'see the worker log'}"[:1000],
                            int((time.monotonic() - started) * 1000))
    if not result.success:
        logger.info("callback event %s attempt %s failed: %s", claim.event_id, claim.number, result.error)
    event = callback_attempt_record(claim=claim, result=result)
    attempt_counted(event=event, success=result.success, first_delivery=not claim.delivered_before)
    return event
