"""Callback outbox, delivery phase (docs/api.md, "Callbacks"): attempts at one merchant's due events, in batches.

Claim (a short transaction: lease up to the merchant's free bulkhead slots of its due events, sign each body, write
their attempt rows), POST outside any transaction (apps.callbacks.transport; a batch's POSTs at once; an outcome
known while others of the batch are still in flight is written on its attempt's row at once), record (a second
short transaction: the other outcomes on their attempts, and each on its event: delivered, the next attempt counted
from the end of the batch, or dead; the merchant's next batch claimed in the same transaction while the drain bound
allows). Anything that goes wrong between claim and record is a failed
attempt on the schedule; a worker lost in between leaves its leases: the sweeper applies the outcomes already
written and closes the attempts still in flight as failed (apps.callbacks.sweep). A batch never mixes merchants.

Bulkhead: a merchant holds at most CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT leases at once, so a slow endpoint cannot
take the worker slots other merchants' callbacks need. Claim and record both lock the merchant's row: the count and
the leases are one step, and a slot freed by a record goes to the merchant's next waiting event.
"""

import json
import logging
import os
import re
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.callbacks.enqueue import callback_dispatch, callback_url_for, callback_wake_release
from apps.callbacks.metrics import attempt_counted
from apps.callbacks.models import CallbackEvent
from apps.callbacks.transport import PostResult, post_callback
from apps.common import signing
from apps.common.refcache import GENERATION_SELECT, generation_subquery, refcache_scope
from apps.merchants.models import Merchant
from apps.merchants.selectors import platform_key_current, platform_private_key

# Threads making the POSTs of the batches: a worker's Celery threads (Procfile: 16) each drive one merchant's batch
# of at most CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT attempts.
POSTERS = 64
# A batch that ends within this (a healthy endpoint's, even on a loaded host) has its outcomes written together by
# its record; after it (an attempt is slow), the outcomes known, and each later one while others of the batch are
# still in flight, are written at once. Writing every outcome apart, or after 50 ms, cost the bench's batches about
# 60 % more CPU for their outcomes: on a busy worker the POSTs of a batch end tens of ms apart (docs/performance.md,
# "Measured changes").
TOGETHER_SECONDS = 1.0

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
    started_at: datetime  # the attempt row's month: statements that find it say it, and read one partition


def lease_seconds() -> float:
    """Seconds a claimed attempt holds its event (CALLBACK_LEASE_SECONDS, floored at 3 × timeout + 30)."""
    # Longer than any attempt can take (the transport's deadline is the timeout), so a live worker never loses its
    # lease; short enough that a lost worker delays the callback by minutes at most.
    return max(settings.CALLBACK_LEASE_SECONDS, 3 * settings.CALLBACK_TIMEOUT_SECONDS + 30)


def next_delay(*, number: int, manual: bool) -> int | None:
    """Seconds from the end of failed attempt `number` to the next one, or None: the event is dead (docs/api.md,
    "Callbacks": nine attempts; a manual re-send is a single one)."""
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


# Named queries of a delivery (STYLE.md, "One database, one way"): the statements every batch runs, written by hand
# because Django's building and compiling them was most of a worker's CPU (docs/performance.md, "Measured changes": one
# worker's CPU per event 1.95 -> 1.16 ms, 7 alternated pairs). Each comment gives the share of the worker's CPU
# (py-spy --gil of bench/callbacks_only.py) its ORM statement cost. Parameters are bound; Django's cursor runs them
# in the service's transaction.

# The merchant's due, unleased events (`first` before the others when given, then the oldest) with the count of its
# live leases, one statement started after the merchant's lock was granted, so the count sees every lease committed
# before. Through callback_event_by_merchant and callback_event_merchant_lease (docs/callbacks.md, "Indexes"). The
# ORM's build and compile of it (the CASE of the order, the COUNT subquery): 9.5 % of the worker.
_CANDIDATES = """SELECT e.id, e.type, e.payload, e.attempts_count, e.resend_requested, e.delivered_at,
       (SELECT COUNT(*) FROM callbacks_callbackevent l WHERE l.merchant_id = %s AND l.locked_until > %s) AS leased
  FROM callbacks_callbackevent e
 WHERE e.merchant_id = %s AND e.status = 'pending' AND e.next_attempt_at <= %s AND e.locked_until IS NULL"""
_CANDIDATES_OLDEST = _CANDIDATES + "\n ORDER BY e.next_attempt_at, e.id LIMIT %s"
_CANDIDATES_FIRST = _CANDIDATES + "\n ORDER BY e.id <> %s, e.next_attempt_at, e.id LIMIT %s"
_CANDIDATES_ONLY = _CANDIDATES + " AND e.id = %s\n ORDER BY e.next_attempt_at, e.id LIMIT %s"

# The leases of a batch, each event with its URL at attempt time (callback_url_for: not the one at enqueue, a URL set
# or fixed later is used from now on), the ids and URLs as two arrays read side by side. ORM: 7.0 % of the worker.
_LEASE = """UPDATE callbacks_callbackevent AS e
   SET url = u.url, attempts_count = e.attempts_count + 1, locked_until = %s, dispatched_at = NULL,
       resend_requested = false
  FROM unnest(%s::bigint[], %s::text[]) AS u(id, url)
 WHERE e.id = u.id"""

# The batch's attempt rows with the exact bodies, in one statement: the rows as one jsonb parameter (one json.dumps
# of the batch). ORM's bulk_create took PostgreSQL's UNNEST path, whose jsonb array psycopg dumps in Python (a
# regular-expression callback per quote of each body): 22 % of the worker.
_ATTEMPTS_INSERT = """INSERT INTO callbacks_callbackattempt
       (event_id, number, manual, started_at, finished_at, duration_ms, url, key_version, request_body,
        http_status, response_excerpt, error, success)
SELECT r.event_id, r.number, r.manual, %s, NULL, 0, r.url, r.key_version, r.request_body, NULL, '', '', false
  FROM jsonb_to_recordset(%s::jsonb)
       AS r(event_id bigint, number integer, manual boolean, url text, key_version integer, request_body jsonb)
RETURNING event_id, id"""

# The record's lock: the batch's events with their merchant, both locked in one statement, merchant first (the order
# of OF), the events in the order Django's select_for_update() took them (the model's ordering), with the reference
# generation read for the platform key of the next batch. NO KEY UPDATE: orders and events that reference the
# merchant, and attempt rows that reference the event, can still be inserted meanwhile (a foreign key check takes KEY
# SHARE). A racing worker that waited for either lock gets the rows as the winner left them. ORM (select_related,
# two models' instances, the generation subquery): 10.3 % of the worker.
_RECORD_LOCK = f"""SELECT e.id, e.merchant_id, e.type, e.platform_order_no, e.status, e.attempts_count,
       e.next_attempt_at, e.created_at, e.delivered_at, e.locked_until, e.last_error,
       m.collection_callback_url, m.payout_callback_url,
       ({GENERATION_SELECT}) AS reference_generation
  FROM callbacks_callbackevent e JOIN merchants_merchant m ON m.id = e.merchant_id
 WHERE e.id = ANY(%s::bigint[])
 ORDER BY e.id DESC
   FOR NO KEY UPDATE OF m, e"""
_RECORD_LOCK_EVENT_FIELDS = ["id", "merchant_id", "type", "platform_order_no", "status", "attempts_count",
                             "next_attempt_at", "created_at", "delivered_at", "locked_until", "last_error"]

# The outcomes of a batch's attempts, one statement whatever their outcomes and durations: the rows as one jsonb
# parameter. ORM (one UPDATE per distinct outcome, the durations through a jsonb expression): 8.2 % of the worker.
# The attempts' start times bound the statement to their month's partition (docs/callbacks.md, "Retention").
_ATTEMPTS_FINISH = """UPDATE "callbacks_callbackattempt" AS a
   SET finished_at = %s, http_status = o.http_status, response_excerpt = o.response_excerpt, error = o.error,
       success = o.success, duration_ms = o.duration_ms
  FROM jsonb_to_recordset(%s::jsonb)
       AS o(id bigint, http_status integer, response_excerpt text, error text, success boolean, duration_ms integer)
 WHERE a.id = o.id AND a.started_at = ANY(%s::timestamptz[])"""

# The outcomes of a batch's events (delivered, the next attempt's time, or dead; the lease cleared), one statement
# whatever their outcomes: the rows as one jsonb parameter, the times in ISO 8601 with their offset. ORM (one UPDATE
# per distinct outcome): 11 % of the worker once the statements above were named queries.
_EVENTS_OUTCOME = """UPDATE callbacks_callbackevent AS e
   SET locked_until = o.locked_until, status = o.status, delivered_at = o.delivered_at,
       next_attempt_at = o.next_attempt_at, last_error = o.last_error
  FROM jsonb_to_recordset(%s::jsonb)
       AS o(id bigint, locked_until timestamptz, status text, delivered_at timestamptz, next_attempt_at timestamptz,
            last_error text)
 WHERE e.id = o.id"""


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _query(sql: str, params: list) -> list[tuple]:
    """One named query through Django's cursor (the caller's transaction, Django's statement log and wrappers)."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def _claimable(now: datetime) -> dict:
    return {"status": CallbackEvent.Status.PENDING, "next_attempt_at__lte": now, "locked_until__isnull": True}


def _claim_locked(*, merchant: Merchant, generation: int, now: datetime, first: int | None = None,
                  only: bool = False, limit: int | None = None) -> list[Claim]:
    """Inside a transaction holding the merchant's lock: lease as many of its due, unleased events as its bulkhead
    has free slots (`first` before the others, then the oldest), and write their attempt rows. Three statements:
    the candidates with the count of the merchant's live leases (one statement, started after the merchant's lock
    was granted, so it sees every lease committed before), the leases, the attempt rows. When `first` is due but
    refused a slot, it waits for one (`dispatched_at` unset: the record that frees a slot, or the sweeper, queues
    it)."""
    cap = settings.CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT
    params = [merchant.pk, now, merchant.pk, now]
    if first is None:
        sql = _CANDIDATES_OLDEST
    elif only:
        sql, params = _CANDIDATES_ONLY, [*params, first]
    else:
        sql, params = _CANDIDATES_FIRST, [*params, first]
    rows = _query(sql, [*params, min(cap, limit or cap)])
    if not rows:
        return []
    taken = rows[:max(0, cap - (rows[0][6] or 0))]
    if not taken:
        if first is not None and rows[0][0] == first:
            # Waiting: the next record of this merchant, or the sweeper, queues it.
            CallbackEvent.objects.filter(pk=first).update(dispatched_at=None)
        return []
    urls = [callback_url_for(merchant=merchant, type=row[1]) for row in taken]
    _query(_LEASE, [now + timedelta(seconds=lease_seconds()), [row[0] for row in taken], urls])
    attempts = []
    with refcache_scope(generation=generation):
        for (pk, _, payload, count, manual, _, _), url in zip(taken, urls, strict=True):
            body, key_version = callback_body_sign(payload=json.loads(payload), now=now)
            attempts.append({"event_id": pk, "number": count + 1, "manual": manual, "url": url,
                             "key_version": key_version, "request_body": body})
    attempt_ids = dict(_query(_ATTEMPTS_INSERT, [now, json.dumps(attempts)]))
    return [Claim(a["event_id"], attempt_ids[a["event_id"]], a["number"], merchant.pk, a["url"], a["request_body"],
                  a["manual"], row[5] is not None, now) for a, row in zip(attempts, taken, strict=True)]


def _claim_of_merchant(*, merchant_id: int, now: datetime, first: int | None = None, only: bool = False,
                       limit: int | None = None) -> list[Claim]:
    """A transaction of four statements: the merchant locked (with the reference generation read, for the platform
    key), then `_claim_locked`: the candidates, the leases, the attempt rows."""
    with transaction.atomic(durable=True):
        merchant = (Merchant.objects.select_for_update(no_key=True).filter(pk=merchant_id)
                    .annotate(reference_generation=generation_subquery()).first())
        return _claim_locked(merchant=merchant, generation=merchant.reference_generation, now=now, first=first,
                             only=only, limit=limit)


def _event_state(event_id: int, now: datetime) -> tuple[int | None, bool]:
    """The event's merchant and whether the event can be claimed now (pending, due, not leased), read without a lock:
    most messages that find nothing (a duplicate, or an event a batch of its merchant's took) end here, and do not
    queue behind the merchant's lock."""
    row = CallbackEvent.objects.filter(pk=event_id).values_list("merchant_id", "status", "next_attempt_at",
                                                                "locked_until").first()
    if row is None:
        return None, False
    merchant_id, status, due, leased = row
    return merchant_id, status == CallbackEvent.Status.PENDING and due is not None and due <= now and leased is None


def callback_attempts_claim(*, event_id: int, limit: int | None = None, only: bool = False) -> list[Claim]:
    """The attempts a message for `event_id` starts: that event, if it is due, not leased and its merchant has a free
    slot, and as many more of the merchant's due events as the bulkhead has free slots (only `event_id` when `only`).
    Empty when the event is not due, done, leased (a duplicate, early or late message), or refused a slot (then it
    waits for one): one statement when the event is not claimable, else the four of `_claim_of_merchant`."""
    now = timezone.now()
    merchant_id, claimable = _event_state(event_id, now)
    if not claimable:
        return []
    return _claim_of_merchant(merchant_id=merchant_id, now=now, first=event_id, only=only, limit=limit)


def callback_attempt_claim(*, event_id: int) -> Claim | None:
    """Lease a due, unleased PENDING event and write its attempt row with the exact body to be sent. None when it is
    not due, done, leased, or refused by the merchant's bulkhead (then it waits for a slot, `dispatched_at` unset)."""
    claims = callback_attempts_claim(event_id=event_id, only=True)
    return claims[0] if claims else None


_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(text: str) -> str:
    """Text PostgreSQL stores as it is: NUL and lone surrogates (which a reply's charset can produce) become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text.replace("\x00", "\ufffd"))


def callback_attempts_finish(*, outcomes: list[tuple[Claim, PostResult]]) -> None:
    """Outcomes on their attempts' rows while others of their batch are still in flight (one UPDATE per outcome but
    the duration, outside any transaction), not when the batch's slowest attempt ends: a worker lost before its batch's record
    loses only the attempts still in flight, and the sweeper applies a written outcome to its event once the lease
    has run out (apps.callbacks.sweep.callback_lease_expire)."""
    _outcomes_write(outcomes=outcomes, now=timezone.now())


def _outcomes_write(*, outcomes: list[tuple[Claim, PostResult]], now: datetime) -> None:
    if not outcomes:
        return
    _query(_ATTEMPTS_FINISH, [now, json.dumps([
        {"id": claim.attempt_id, "http_status": result.http_status, "response_excerpt": storable(result.reply),
         "error": storable(result.error), "success": result.success, "duration_ms": result.duration_ms}
        for claim, result in outcomes]), sorted({claim.started_at for claim, _ in outcomes})])


def callback_attempt_record(*, claim: Claim, result: PostResult) -> CallbackEvent:
    """Store the outcome of a claimed attempt on its row and on the event: delivered, the next attempt counted from
    now (the end of this one), or dead; then hand the freed bulkhead slot to the merchant's next waiting event."""
    recorded, _, _ = callback_attempts_record(outcomes=[(claim, result)])
    return recorded[0]


def _record_lock(event_ids: list[int]) -> tuple[dict[int, CallbackEvent], Merchant, int]:
    """The events of one merchant's batch and the merchant, locked (_RECORD_LOCK), as model instances (the fields
    the record reads; the others are deferred), with the reference generation."""
    alias = connection.alias
    events, merchant, generation = {}, None, None
    for row in _query(_RECORD_LOCK, [event_ids]):
        event = CallbackEvent.from_db(alias, _RECORD_LOCK_EVENT_FIELDS, row[:11])
        if merchant is None:
            merchant = Merchant.from_db(alias, ["id", "collection_callback_url", "payout_callback_url"],
                                        (row[1], row[11], row[12]))
            generation = row[13]
        event.merchant = merchant
        events[event.pk] = event
    return events, merchant, generation


@transaction.atomic(durable=True)
def callback_attempts_record(*, outcomes: list[tuple[Claim, PostResult]], claim_next: bool = False,
                             limit: int | None = None, waiting_only: bool = True,
                             written: frozenset[int] = frozenset()) -> tuple[list[CallbackEvent], list[Claim], bool]:
    """Store the outcomes of one merchant's claimed attempts on their rows (but those `written` already:
    callback_attempts_finish) and on their events (delivered, the next attempt counted from now, the end of the
    batch, or dead), in one transaction under the merchant's lock. Then,
    with `claim_next`, claim the merchant's next due events in the same transaction (the slots just freed, and any
    other free ones: `_claim_locked`); else hand a freed slot to the merchant's next waiting event (with
    `waiting_only=False`: to its oldest due event, whether or not a task was queued for it: the continuation of a
    drain stopped by its bound). Returns the events as recorded (in the order of `outcomes`), the next claims, and
    whether a task was queued."""
    now = timezone.now()
    claims = {claim.event_id: (claim, result) for claim, result in outcomes}
    events, merchant, generation = _record_lock(list(claims))
    changed, freed = [], False
    for event_id, (claim, result) in claims.items():
        event = events[event_id]
        error = storable(result.error)
        if event.attempts_count != claim.number or event.locked_until is None:
            # Our lease ran out and the sweeper counted this attempt as lost: the event's schedule is set. The
            # merchant did get a late success, though.
            if not (result.success and event.status != CallbackEvent.Status.DELIVERED):
                continue
            event_delivered(event, now)
        else:
            freed = True
            event.locked_until = None
            if result.success:
                event_delivered(event, now)
            elif event.status != CallbackEvent.Status.DELIVERED:  # else an earlier attempt, counted lost, arrived
                schedule_after_failure(event, number=claim.number, manual=claim.manual, error=error, failed_at=now)
        changed.append({"id": event_id, "locked_until": _iso(event.locked_until), "status": event.status,
                        "delivered_at": _iso(event.delivered_at), "next_attempt_at": _iso(event.next_attempt_at),
                        "last_error": event.last_error})
    _outcomes_write(outcomes=[(claim, result) for claim, result in outcomes if claim.attempt_id not in written],
                    now=now)
    if changed:
        _query(_EVENTS_OUTCOME, [json.dumps(changed)])
    recorded = [events[event_id] for event_id in claims]
    if claim_next:
        return recorded, _claim_locked(merchant=merchant, generation=generation, now=now, limit=limit), False
    handed_off = freed and _hand_off_slot(merchant_id=merchant.pk, now=now, waiting_only=waiting_only)
    return recorded, [], handed_off


def event_delivered(event: CallbackEvent, now: datetime) -> None:
    """The event delivered at `now` (not saved here)."""
    # `delivered_at` is the first success (docs/api.md, "Callback events: list and re-send"): a re-send of a delivered
    # event leaves it as it was.
    event.status, event.delivered_at, event.next_attempt_at, event.last_error = (
        CallbackEvent.Status.DELIVERED, event.delivered_at or now, None, "")


def _hand_off_slot(*, merchant_id: int, now: datetime, waiting_only: bool = True) -> bool:
    """Queue the merchant's oldest waiting event (due, unleased, no task queued; with `waiting_only=False` any due,
    unleased one), if any, after commit. Whether one was queued."""
    queued = {"dispatched_at__isnull": True} if waiting_only else {}
    waiting = (CallbackEvent.objects.filter(merchant_id=merchant_id, **_claimable(now), **queued)
               .order_by("next_attempt_at", "pk").values_list("pk", flat=True).first())
    # Conditional: the sweeper may have queued it meanwhile.
    if waiting and CallbackEvent.objects.filter(pk=waiting, **queued).update(dispatched_at=now):
        transaction.on_commit(lambda: callback_dispatch(event_id=waiting))
        return True
    return False


def _attempt(claim: Claim) -> PostResult:
    started = time.monotonic()
    try:
        result = post_callback(claim.url, claim.body)
    except Exception as exc:  # noqa: BLE001 - a failed attempt on the schedule, never a lease left behind
        logger.exception("callback event %s attempt %s raised", claim.event_id, claim.number)
        result = PostResult(None, "", f"the attempt failed unexpectedly: {exc or 'see the worker log'}"[:1000],
                            int((time.monotonic() - started) * 1000))
    if not result.success:
        logger.info("callback event %s attempt %s failed: %s", claim.event_id, claim.number, result.error)
    return result


_posters: ThreadPoolExecutor | None = None
_posters_lock = threading.Lock()


def _attempts_make(claims: list[Claim]) -> tuple[list[PostResult], frozenset[int]]:
    """The POSTs of one batch (one merchant's), at once: each is in flight as it would be in a task of its own, so a
    slow endpoint holds a batch no longer than its slowest attempt (one deadline), and a merchant keeps the
    parallelism its bulkhead allows. When the batch has not ended after TOGETHER_SECONDS, the outcomes known by then,
    and each later one while others are still in flight, are written at once by the calling thread (it holds the
    task's database connection; the posting threads have none); the last ones are left to the batch's record, which
    follows at once. Returns the results and the attempts written. A single attempt is made in the calling
    thread."""
    global _posters
    if len(claims) == 1:
        return [_attempt(claims[0])], frozenset()
    if _posters is None:
        with _posters_lock:
            if _posters is None:
                _posters = ThreadPoolExecutor(max_workers=POSTERS, thread_name_prefix="callback-post")
    futures = {_posters.submit(_attempt, claim): n for n, claim in enumerate(claims)}
    results: list[PostResult | None] = [None] * len(claims)
    written = set()
    done, pending = wait(futures, timeout=TOGETHER_SECONDS)
    while True:
        for future in done:
            results[futures[future]] = future.result()
        if not pending:
            return results, frozenset(written)
        if done:
            callback_attempts_finish(outcomes=[(claims[futures[f]], results[futures[f]]) for f in done])
            written.update(claims[futures[f]].attempt_id for f in done)
        done, pending = wait(pending, return_when=FIRST_COMPLETED)


# A forked child (a prefork pool) must not inherit the parent's pool, whose threads did not survive the fork.
os.register_at_fork(after_in_child=lambda: globals().update(_posters=None, _posters_lock=threading.Lock()))


def callback_deliver(*, event_id: int) -> CallbackEvent | None:
    """The attempts a message for `event_id` starts (that event first, then the merchant's other due events, up to
    its free bulkhead slots), then, while the merchant has due events and free slots and the drain bound
    (CALLBACK_DRAIN_MAX_EVENTS, CALLBACK_DRAIN_MAX_SECONDS) allows, its next batch: each batch's record and the
    next batch's claim are one transaction. No transaction is open during the HTTP calls.

    At the end the merchant's wake mark is released and its due events looked at once more (`callback_dispatch`:
    an event enqueued while the mark was set queued no task of its own, relying on this look). A drain stopped by
    its bound queues a task for the merchant's oldest due event instead, behind other merchants' tasks, and keeps
    the mark. Returns `event_id`'s event as recorded (None if it could not be claimed)."""
    now = timezone.now()
    merchant_id, claimable = _event_state(event_id, now)
    if merchant_id is None:
        return None
    claims = _claim_of_merchant(merchant_id=merchant_id, now=now, first=event_id) if claimable else []
    mine = None
    started, made = time.monotonic(), 0
    while True:
        while claims:
            results, written = _attempts_make(claims)
            made += len(claims)
            more = (made < settings.CALLBACK_DRAIN_MAX_EVENTS
                    and time.monotonic() - started < settings.CALLBACK_DRAIN_MAX_SECONDS)
            recorded, next_claims, handed_off = callback_attempts_record(
                outcomes=list(zip(claims, results, strict=True)), claim_next=more, waiting_only=False,
                written=written)
            for claim, result, event in zip(claims, results, recorded, strict=True):
                attempt_counted(event=event, success=result.success, first_delivery=not claim.delivered_before)
                if event.pk == event_id:
                    mine = event
            if handed_off:
                return mine  # the task queued for the merchant's next due event goes on, and releases the mark
            claims = next_claims
        callback_wake_release(merchant_id=merchant_id)
        now = timezone.now()
        if not CallbackEvent.objects.filter(merchant_id=merchant_id, **_claimable(now)).exists():
            return mine
        claims = _claim_of_merchant(merchant_id=merchant_id, now=now)
        if not claims:  # refused: the merchant's slots are taken by tasks that will look again when they end
            return mine
