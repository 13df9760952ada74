"""A healthy merchant's callback attempt costs the same whatever another merchant's backlog: with 100,000 pending
events of a merchant whose endpoint is down (and a long delivered history of the healthy one, as in production),
the planner serves the claim and the hand-off of the freed bulkhead slot from indexes that reach the healthy
merchant's rows directly, touching a handful of rows, never the backlog (docs/callbacks.md, "Indexes")."""

from datetime import timedelta

from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from apps.callbacks.deliver import callback_deliver
from apps.callbacks.models import CallbackEvent
from apps.callbacks.sweep import callbacks_sweep

BACKLOG = 100_000
HISTORY = 50_000
# Rows a statement may read (returned or removed by a filter, over all its plan nodes): the healthy merchant's own
# few rows, the merchant row, the bulkhead's leases. The backlog would be thousands.
ROWS_BOUND = 50


def _insert_events(*, merchant_id: int, count: int, prefix: str, status: str, due_sql: str, dispatched_sql: str,
                   locked_sql: str = "NULL") -> None:
    """`count` events of one merchant, in one INSERT … SELECT generate_series (test data only)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {CallbackEvent._meta.db_table}
                  (merchant_id, type, platform_order_no, url, payload, status, attempts_count, next_attempt_at,
                   created_at, delivered_at, locked_until, dispatched_at, resend_requested, last_error)
                SELECT %s, 'collection.success', %s || g, '', '{{}}'::jsonb, %s, 3, {due_sql},
                       now() - interval '2 days', NULL, {locked_sql}, {dispatched_sql}, false, ''
                  FROM generate_series(1, %s) AS g""",
            [merchant_id, prefix, status, count])


def _rows_touched(plan: dict) -> int:
    own = plan.get("Actual Rows", 0) * plan.get("Actual Loops", 1)
    own += plan.get("Rows Removed by Filter", 0) + plan.get("Rows Removed by Index Recheck", 0)
    return own + sum(_rows_touched(child) for child in plan.get("Plans", []))


def _indexes(plan: dict) -> set[str]:
    found = {plan["Index Name"]} if "Index Name" in plan else set()
    for child in plan.get("Plans", []):
        found |= _indexes(child)
    return found


def _explain(sql: str, params) -> dict:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
        return cursor.fetchone()[0][0]["Plan"]


# One slot and one attempt per task: the waiting event is then handed the freed slot (queued), not claimed in the
# same task's next batch, so the hand-off's statements run too (the next batch's claim is the first claim's shape).
@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=1, CALLBACK_DRAIN_MAX_EVENTS=1)
def test_a_dead_merchants_backlog_does_not_enter_a_healthy_merchants_claim_or_hand_off(
        hooked_merchant, other_merchant, enqueue, dispatched, callback_receiver,
        django_capture_on_commit_callbacks):
    dead = other_merchant.merchant
    # The dead merchant: a day of events, half due and waiting for a bulkhead slot (older than anything of the
    # healthy merchant), half with their next retry scheduled; its four slots leased by attempts in flight.
    _insert_events(merchant_id=dead.pk, count=BACKLOG // 2, prefix="DW", status="pending",
                   due_sql="now() - interval '1 day' + g * interval '1 second'", dispatched_sql="NULL")
    _insert_events(merchant_id=dead.pk, count=BACKLOG // 2 - 4, prefix="DR", status="pending",
                   due_sql="now() + g * interval '1 second'", dispatched_sql="NULL")
    _insert_events(merchant_id=dead.pk, count=4, prefix="DL", status="pending",
                   due_sql="now() - interval '1 hour'", dispatched_sql="now() - interval '1 minute'",
                   locked_sql="now() + interval '1 minute'")
    # The healthy merchant: a long delivered history, one event due now and one waiting for the slot it frees.
    _insert_events(merchant_id=hooked_merchant.pk, count=HISTORY, prefix="HD", status="delivered",
                   due_sql="NULL", dispatched_sql="NULL")
    event = enqueue(hooked_merchant, no="C-healthy-1")
    waiting = enqueue(hooked_merchant, no="C-healthy-2")
    now = timezone.now()
    CallbackEvent.objects.filter(pk=event.pk).update(next_attempt_at=now - timedelta(seconds=2), dispatched_at=now)
    CallbackEvent.objects.filter(pk=waiting.pk).update(next_attempt_at=now - timedelta(seconds=1),
                                                       dispatched_at=None)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {CallbackEvent._meta.db_table}")

    statements: list[tuple[str, object]] = []

    def record(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record), django_capture_on_commit_callbacks(execute=True):
        recorded = callback_deliver(event_id=event.pk)

    assert recorded is not None and recorded.status == CallbackEvent.Status.DELIVERED
    assert dispatched == [waiting.pk]  # the freed slot went to the healthy merchant's waiting event

    # Every statement that reads or writes events: the claim's unlocked read of the event, its candidates with the
    # bulkhead's count, the lease, the record's lock, the outcome, the hand-off's read and its conditional UPDATE.
    touching = [(sql, params) for sql, params in statements
                if sql.lstrip().upper().startswith(("SELECT", "UPDATE")) and CallbackEvent._meta.db_table in sql]
    assert len(touching) == 7, [sql[:80] for sql, _ in touching]
    # The hand-off's read: the merchant's oldest due event's id (the drain's bound reached, any due one).
    hand_off = [(sql, params) for sql, params in touching
                if sql.lstrip().startswith('SELECT "callbacks_callbackevent"."id" AS "pk" FROM')]
    assert len(hand_off) == 1
    with transaction.atomic():  # EXPLAIN ANALYZE runs the statements (their row locks too): undone at the end
        # As when the hand-off ran: the healthy merchant's event waiting, to be found.
        CallbackEvent.objects.filter(pk=waiting.pk).update(dispatched_at=None)
        for sql, params in touching:
            plan = _explain(sql, params)
            assert _rows_touched(plan) <= ROWS_BOUND, (sql, plan)
            assert "callback_event_due" not in _indexes(plan), (sql, plan)
        hand_off_plan = _explain(*hand_off[0])
        assert _indexes(hand_off_plan) == {"callback_event_by_merchant"}, hand_off_plan
        transaction.set_rollback(True)


def test_the_sweeper_queues_a_healthy_merchants_retry_whatever_a_dead_merchants_backlog(
        hooked_merchant, other_merchant, enqueue, dispatched):
    dead = other_merchant.merchant
    _insert_events(merchant_id=dead.pk, count=1_000, prefix="DW", status="pending",
                   due_sql="now() - interval '1 day' + g * interval '1 second'", dispatched_sql="NULL")
    _insert_events(merchant_id=dead.pk, count=4, prefix="DL", status="pending",
                   due_sql="now() - interval '1 hour'", dispatched_sql="now() - interval '1 minute'",
                   locked_sql="now() + interval '1 minute'")
    retry = enqueue(hooked_merchant, no="C-healthy-retry")
    CallbackEvent.objects.filter(pk=retry.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1),
                                                     dispatched_at=None, attempts_count=1)
    dispatched.clear()

    callbacks_sweep(limit=500)

    assert retry.pk in dispatched
