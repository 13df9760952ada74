"""The statements of one delivery attempt are pinned, so that none is added silently (docs/callbacks.md,
"Statements per attempt"): each is one round trip and PostgreSQL work on the path every callback takes."""

from datetime import timedelta

from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.callbacks.deliver import callback_attempts_claim, callback_attempts_record, callback_deliver
from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.callbacks.transport import PostResult
from apps.common.refcache import refcache_scope
from apps.merchants.selectors import platform_key_current

# Claim: the event read (unlocked: is it due, whose is it), the merchant locked (with the reference generation), the
# candidates with the bulkhead's count of the merchant's leases, the leases, the attempt rows; the platform key comes
# from the reference cache. Record: the events and their merchant locked in one statement, the attempts' outcomes,
# the events' outcomes (one UPDATE per outcome), then either the next batch's claim (candidates, leases, attempt
# rows) or the hand-off of a freed slot (the merchant's first waiting event, its UPDATE). Transactions' BEGIN and
# COMMIT are not counted here. One attempt alone costs two more than a batch's share: the unlocked read and the
# merchant's lock apart from the candidates.
STATEMENTS_ONE_ATTEMPT_WITH_HAND_OFF = 10
# A batch of four (one merchant's four free slots) and the drain's last looks for more (in the record's transaction,
# and once more after the merchant's wake mark is released): 9 statements beside the attempts' outcomes (1 to 4).
STATEMENTS_BATCH_OF_FOUR = 9


# One slot, one attempt per task: the freed slot is handed to the waiting event (queued), not claimed by this task.
@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=1, CALLBACK_DRAIN_MAX_EVENTS=1)
def test_one_delivered_attempt_with_a_hand_off_runs_a_fixed_number_of_statements(
        hooked_merchant, enqueue, dispatched, django_capture_on_commit_callbacks):
    event = enqueue(hooked_merchant, no="C-count-1")
    waiting = enqueue(hooked_merchant, no="C-count-2")
    now = timezone.now()
    CallbackEvent.objects.filter(pk=event.pk).update(next_attempt_at=now - timedelta(seconds=2))
    CallbackEvent.objects.filter(pk=waiting.pk).update(next_attempt_at=now - timedelta(seconds=1), dispatched_at=None)
    callback_deliver(event_id=event.pk + 1_000_000)  # warm: nothing to claim
    with refcache_scope():
        platform_key_current()  # cached, as for every attempt of a worker after its first (until a rotation)

    with CaptureQueriesContext(connection) as queries, django_capture_on_commit_callbacks(execute=True):
        recorded = callback_deliver(event_id=event.pk)

    assert recorded.status == CallbackEvent.Status.DELIVERED
    assert dispatched == [waiting.pk]
    # The test's own transaction turns each service's transaction into a savepoint: not statements of the attempt.
    statements = [q["sql"] for q in queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]
    assert len(statements) == STATEMENTS_ONE_ATTEMPT_WITH_HAND_OFF, "\n".join(sql[:160] for sql in statements)


def test_a_batch_of_four_due_events_of_one_merchant_runs_a_fixed_number_of_statements(
        hooked_merchant, enqueue, dispatched, callback_receiver):
    events = [enqueue(hooked_merchant, no=f"C-batch-{n}") for n in range(4)]
    callback_deliver(event_id=events[0].pk + 1_000_000)  # warm: nothing to claim
    with refcache_scope():
        platform_key_current()

    with CaptureQueriesContext(connection) as queries:
        recorded = callback_deliver(event_id=events[0].pk)

    assert recorded.status == CallbackEvent.Status.DELIVERED
    assert set(CallbackEvent.objects.filter(pk__in=[e.pk for e in events]).values_list("status", flat=True)) == {
        CallbackEvent.Status.DELIVERED}
    assert len(callback_receiver.requests) == 4 and dispatched == []
    statements = [q["sql"] for q in queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]
    # The attempts' outcomes: one UPDATE for the batch (it ended within deliver.TOGETHER_SECONDS here).
    outcomes = [sql for sql in statements if sql.startswith('UPDATE "callbacks_callbackattempt"')]
    assert len(outcomes) == 1
    assert len(statements) - len(outcomes) == STATEMENTS_BATCH_OF_FOUR, "\n".join(sql[:160] for sql in statements)


def test_a_batch_answered_alike_in_distinct_times_keeps_each_attempts_own_duration_in_one_update(
        hooked_merchant, enqueue):
    """The outcomes of a batch answered alike are one UPDATE whatever their durations (docs/performance.md, "Measured changes"):
    each attempt's row still gets its own duration."""
    events = [enqueue(hooked_merchant, no=f"C-durations-{n}") for n in range(4)]
    claims = callback_attempts_claim(event_id=events[0].pk)
    assert len(claims) == 4
    durations = {claim.attempt_id: 3 + 1000 * n for n, claim in enumerate(claims)}

    with CaptureQueriesContext(connection) as queries:
        callback_attempts_record(outcomes=[(claim, PostResult(200, "OK", "", durations[claim.attempt_id]))
                                           for claim in claims])

    assert dict(CallbackAttempt.objects.filter(pk__in=list(durations)).values_list("pk", "duration_ms")) == durations
    assert set(CallbackAttempt.objects.filter(pk__in=list(durations)).values_list("success", "http_status")) == {
        (True, 200)}
    outcomes = [q["sql"] for q in queries if q["sql"].startswith('UPDATE "callbacks_callbackattempt"')]
    assert len(outcomes) == 1


def test_a_batch_answered_differently_records_each_attempt_and_event_its_own_outcome_in_one_update_each(
        hooked_merchant, enqueue, clock):
    """A batch whose attempts ended in four different ways: one UPDATE of the attempts and one of the events
    (docs/performance.md, "Measured changes"), each row with its own outcome: delivered, or the next attempt 15 s after this one
    with its own error; every lease cleared."""
    events = [enqueue(hooked_merchant, no=f"C-mixed-{n}") for n in range(4)]
    claims = callback_attempts_claim(event_id=events[0].pk)
    assert len(claims) == 4
    results = [PostResult(200, "success", "", 5), PostResult(500, "oops \u00e9", "HTTP 500", 70),
               PostResult(None, "", "connection failed: connection refused", 900),
               PostResult(200, 'say "ok"', "reply is not 'success'", 12)]

    with CaptureQueriesContext(connection) as queries:
        callback_attempts_record(outcomes=list(zip(claims, results, strict=True)))

    attempts = {a.event_id: a for a in CallbackAttempt.objects.filter(pk__in=[c.attempt_id for c in claims])}
    for claim, result in zip(claims, results, strict=True):
        attempt = attempts[claim.event_id]
        assert (attempt.http_status, attempt.response_excerpt, attempt.error, attempt.success,
                attempt.duration_ms, attempt.finished_at) == (result.http_status, result.reply, result.error,
                                                              result.success, result.duration_ms, clock.now)
        event = CallbackEvent.objects.get(pk=claim.event_id)
        assert event.locked_until is None and event.attempts_count == 1
        if result.success:
            assert (event.status, event.delivered_at, event.next_attempt_at, event.last_error) == (
                CallbackEvent.Status.DELIVERED, clock.now, None, "")
        else:
            assert (event.status, event.delivered_at, event.next_attempt_at, event.last_error) == (
                CallbackEvent.Status.PENDING, None, clock.now + timedelta(seconds=15), result.error)
    sqls = [q["sql"] for q in queries]
    assert len([sql for sql in sqls if sql.startswith('UPDATE "callbacks_callbackattempt"')]) == 1
    assert len([sql for sql in sqls if sql.lstrip().upper().startswith("UPDATE")
                and CallbackEvent._meta.db_table in sql]) == 1
