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
# COMMIT are not counted here. (12 before issue 23; 8 per attempt before batches, whatever the load: one attempt
# alone now costs two more, the unlocked read and the merchant's lock apart from the candidates.)
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
    # The attempts' outcomes: one UPDATE per distinct outcome, the duration included (1 to 4 here).
    outcomes = [sql for sql in statements if sql.startswith('UPDATE "callbacks_callbackattempt"')]
    assert 1 <= len(outcomes) <= 4
    assert len(statements) - len(outcomes) == STATEMENTS_BATCH_OF_FOUR, "\n".join(sql[:160] for sql in statements)


def test_a_batch_answered_alike_in_distinct_times_keeps_each_attempts_own_duration_in_one_update(
        hooked_merchant, enqueue):
    """The outcomes of a batch answered alike are one UPDATE whatever their durations (docs/performance.md, "cb3"):
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
