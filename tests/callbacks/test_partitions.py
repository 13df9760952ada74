"""Callback attempts by month (docs/callbacks.md, "Retention"): the worker's statements read one month's partition,
beat's creation of the months ahead is idempotent, and retention drops a month past it unless a pending callback
still needs it."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from dateutil.relativedelta import relativedelta
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from apps.callbacks.deliver import callback_attempt_claim, callback_deliver
from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.callbacks.selectors import callback_events_for_merchant
from apps.callbacks.sweep import callbacks_sweep
from apps.common.partitions import partitions_create, partitions_drop_expired
from tests.conftest import _partitions_for_the_suite
from tests.helpers import at_once
from tests.support.receiver import Reply

TABLE = "callbacks_callbackattempt"
PARTITION = re.compile(rf"\b{TABLE}_(\d{{4}}_[a-z]{{3}})\b")
S = CallbackEvent.Status


def _partitions() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                       "WHERE i.inhparent = %s::regclass", [TABLE])
        return {row[0].removeprefix(f"{TABLE}_") for row in cursor.fetchall()}


def _rows_by_partition() -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tableoid::regclass::text, count(*) FROM {TABLE} GROUP BY 1")
        return {name.removeprefix(f"{TABLE}_"): count for name, count in cursor.fetchall()}


def _partitions_read(sql: str) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}")
        return {match for (line,) in cursor.fetchall() for match in PARTITION.findall(line)}


def _event_with_attempt(merchant, no: str, started_at: datetime, status: str = S.DELIVERED) -> CallbackEvent:
    with transaction.atomic():
        event = CallbackEvent.objects.create(merchant=merchant, type=CallbackEvent.Type.COLLECTION_SUCCESS,
                                             platform_order_no=no, payload={"platform_order_no": no}, status=status,
                                             attempts_count=1)
        CallbackAttempt.objects.create(event=event, number=1, started_at=started_at, url="https://example.com/",
                                       success=status == S.DELIVERED)
    return event


def _of_attempts(created: list[str]) -> list[str]:
    """The attempts' tables among the partitions created (beat creates every partitioned table's)."""
    return [name for name in created if name.startswith(TABLE)]


def _months(first: datetime, count: int) -> list[datetime]:
    return [first + relativedelta(months=n) for n in range(count)]


# --- the hot path reads one partition ----------------------------------------------------------------------------

def test_the_workers_sweepers_and_lists_statements_on_attempts_read_one_month(
        hooked_merchant, callback_receiver, enqueue, clock, dispatched):
    clock.set(datetime(2026, 3, 16, 12, 0, tzinfo=UTC))  # mid-month: the bounds' margins stay in March
    callback_receiver.script(Reply(500, "boom"))
    failed = enqueue(hooked_merchant, no="C-part-1")
    lost = enqueue(hooked_merchant, no="C-part-2", type=CallbackEvent.Type.PAYOUT_TERMINAL)
    assert {"2026_feb", "2026_mar", "2026_apr"} <= _partitions()  # neighbours a scan without pruning would read

    with CaptureQueriesContext(connection) as queries:
        assert callback_attempt_claim(event_id=lost.pk) is not None  # ... and its worker is lost
        assert callback_deliver(event_id=failed.pk).status == S.PENDING  # a failure: the outcome on the attempt
        clock.advance(121)
        callbacks_sweep()  # the lease ran out: the lost attempt read and finished as failed
        page, _ = callback_events_for_merchant(merchant_id=hooked_merchant.pk, limit=10)

    assert CallbackAttempt.objects.get(event=lost).error and page[0].last_body is not None
    on_attempts = [q["sql"] for q in queries
                   if TABLE in q["sql"] and not q["sql"].startswith(("INSERT", "SAVEPOINT", "RELEASE"))]
    # The batch's outcomes, the sweeper's read and write of the lost attempt, the list's attempts and last bodies.
    assert len(on_attempts) >= 5, on_attempts
    for sql in on_attempts:
        assert _partitions_read(sql) == {"2026_mar"}, sql


def test_an_attempt_in_flight_across_a_month_start_is_found_by_the_sweeper(hooked_merchant, enqueue, clock,
                                                                            dispatched):
    clock.set(datetime(2026, 3, 31, 23, 59, 30, tzinfo=UTC))
    event = enqueue(hooked_merchant, no="C-part-3")
    callback_attempt_claim(event_id=event.pk)  # started in March, its lease runs out in April
    clock.advance(121)
    callbacks_sweep()
    attempt = CallbackAttempt.objects.get(event=event)
    assert attempt.started_at.month == 3 and attempt.finished_at.month == 4 and "worker lost" in attempt.error
    event.refresh_from_db()
    assert event.locked_until is None and event.next_attempt_at is not None


# --- creation ahead ----------------------------------------------------------------------------------------------

def test_creating_the_months_ahead_twice_or_at_once_creates_each_month_once(far_months, settings):
    settings.PARTITIONS_AHEAD_MONTHS = 3
    now = datetime(2041, 5, 10, 8, 0, tzinfo=UTC)
    created = _of_attempts(partitions_create(now=now))
    assert created == [f"{TABLE}_2041_{m}" for m in ("may", "jun", "jul", "aug")]
    assert partitions_create(now=now) == []
    assert _of_attempts(partitions_create(now=now + timedelta(days=30))) == [f"{TABLE}_2041_sep"]

    later = datetime(2042, 5, 10, tzinfo=UTC)
    outcomes = at_once(lambda _: partitions_create(now=later), 2)
    assert [exc for _, exc in outcomes] == [None, None]
    assert sorted(name for result, _ in outcomes for name in _of_attempts(result)) == sorted(
        f"{TABLE}_2042_{m}" for m in ("may", "jun", "jul", "aug"))
    with connection.cursor() as cursor:  # whole months in UTC, whatever the hour the plan ran at
        cursor.execute("SELECT pg_get_expr(c.relpartbound, c.oid) FROM pg_class c WHERE c.relname = %s",
                       [f"{TABLE}_2042_jun"])
        assert cursor.fetchone()[0] == "FOR VALUES FROM ('2042-06-01 00:00:00+00') TO ('2042-07-01 00:00:00+00')"


def test_an_attempt_lands_in_its_months_partition(far_months, merchant, settings):
    settings.PARTITIONS_AHEAD_MONTHS = 0
    for month in _months(datetime(2041, 1, 1, tzinfo=UTC), 2):
        partitions_create(now=month)
    _event_with_attempt(merchant.merchant, "C-edge-1", datetime(2041, 1, 31, 23, 59, 59, 999999, tzinfo=UTC))
    _event_with_attempt(merchant.merchant, "C-edge-2", datetime(2041, 2, 1, 0, 0, tzinfo=UTC))
    assert _rows_by_partition() == {"2041_jan": 1, "2041_feb": 1}


# --- retention ---------------------------------------------------------------------------------------------------

def test_a_year_of_attempts_is_twelve_partitions_and_the_thirteenth_month_is_dropped(far_months, merchant, settings):
    settings.PARTITIONS_AHEAD_MONTHS, settings.CALLBACK_ATTEMPT_RETENTION_MONTHS = 0, 12
    months = _months(datetime(2039, 1, 1, tzinfo=UTC), 13)  # January 2039 to January 2040
    for month in months:
        partitions_create(now=month)
    events = [_event_with_attempt(merchant.merchant, f"C-year-{n}", month + timedelta(days=14))
              for n, month in enumerate(months)]
    assert len(_rows_by_partition()) == 13

    retention = partitions_drop_expired(now=datetime(2040, 1, 20, tzinfo=UTC))

    assert retention.dropped == [f"{TABLE}_2039_jan"] and retention.kept == {}
    kept = _rows_by_partition()
    assert len(kept) == 12 and set(kept.values()) == {1} and "2039_jan" not in kept
    assert "2039_jan" not in _partitions()
    assert not CallbackAttempt.objects.filter(event=events[0]).exists()
    assert CallbackEvent.objects.count() == 13  # the events stay: only their old attempts are gone
    assert partitions_drop_expired(now=datetime(2040, 1, 20, tzinfo=UTC)).dropped == []


def test_retention_keeps_a_month_holding_an_attempt_of_a_pending_callback(far_months, merchant, settings):
    settings.PARTITIONS_AHEAD_MONTHS, settings.CALLBACK_ATTEMPT_RETENTION_MONTHS = 0, 12
    for month in _months(datetime(2038, 12, 1, tzinfo=UTC), 14):  # December 2038 to January 2040
        partitions_create(now=month)
    _event_with_attempt(merchant.merchant, "C-old", datetime(2038, 12, 3, tzinfo=UTC))
    pending = _event_with_attempt(merchant.merchant, "C-pending", datetime(2039, 1, 31, 23, tzinfo=UTC),
                                  status=S.PENDING)
    now = datetime(2040, 1, 20, tzinfo=UTC)

    retention = partitions_drop_expired(now=now)

    assert retention.dropped == [f"{TABLE}_2038_dec"]
    assert retention.kept == {f"{TABLE}_2039_jan": f"it holds an attempt of pending callback event {pending.pk}"}
    assert CallbackAttempt.objects.filter(event=pending).exists() and "2039_jan" in _partitions()

    CallbackEvent.objects.filter(pk=pending.pk).update(status=S.DEAD)  # no longer needed: gone on the next run
    assert partitions_drop_expired(now=now).dropped == [f"{TABLE}_2039_jan"]
    assert not CallbackAttempt.objects.filter(event=pending).exists()


def test_retention_refuses_to_detach_inside_a_transaction(db, settings):
    settings.PARTITIONS_AHEAD_MONTHS, settings.CALLBACK_ATTEMPT_RETENTION_MONTHS = 0, 1
    partitions_create(now=datetime(2041, 1, 1, tzinfo=UTC))  # rolled back with the test's transaction
    with pytest.raises(RuntimeError, match="outside a transaction"):
        partitions_drop_expired(now=datetime(2041, 2, 1, tzinfo=UTC))


def test_the_command_creates_the_missing_months_and_applies_the_retention(far_months, capsys):
    call_command("partitions", "--drop-expired")
    assert '"created": []' in capsys.readouterr().out  # the suite's months exist; nothing is old enough to drop


# --- the migration -----------------------------------------------------------------------------------------------

def _attempt_rows() -> list[tuple]:
    return sorted(CallbackAttempt.objects.values_list("id", "event_id", "number", "started_at", "finished_at"))


@pytest.fixture
def suite_months_again(transactional_db):
    yield
    _partitions_for_the_suite()


def test_the_migration_moves_existing_attempts_both_ways(suite_months_again, merchant):
    moments = [datetime(2026, 1, 5, tzinfo=UTC), datetime(2026, 2, 5, tzinfo=UTC), datetime(2026, 2, 20, tzinfo=UTC)]
    events = [_event_with_attempt(merchant.merchant, f"C-move-{n}", moment) for n, moment in enumerate(moments)]
    in_flight = events[2].attempts.get()
    CallbackAttempt.objects.filter(pk=in_flight.pk).update(finished_at=None)
    before = _attempt_rows()

    call_command("migrate", "callbacks", "0003", verbosity=0)
    assert _partitions() == set()
    assert _attempt_rows() == before
    call_command("migrate", "callbacks", verbosity=0)

    assert _attempt_rows() == before
    assert _rows_by_partition() == {"2026_jan": 1, "2026_feb": 2}
    with transaction.atomic():  # the identity goes on after the moved rows
        newer = CallbackAttempt.objects.create(event=events[0], number=2, started_at=moments[0], url="https://x/")
    assert newer.pk > max(row[0] for row in before)
