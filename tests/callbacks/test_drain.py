"""One delivery task drains its merchant's waiting events, bounded by count and time; an enqueue does not queue a
task when the merchant's busy tasks will drain the event (docs/callbacks.md, Delivery)."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, transaction
from django.test import override_settings

from apps.callbacks import services, tasks
from apps.callbacks.models import CallbackEvent
from apps.callbacks.services import callback_enqueue, callbacks_sweep, collection_success_payload
from tests.callbacks.conftest import paid_order
from tests.support.receiver import CallbackReceiver, Reply


@pytest.fixture
def dispatched(monkeypatch):
    """Event ids handed to the broker (recorded instead of queued, so the test drives each task itself)."""
    ids: list[int] = []
    monkeypatch.setattr(services, "callback_dispatch", lambda *, event_id: ids.append(event_id) or True)
    return ids


def _parked(merchant, enqueue, count: int) -> list[CallbackEvent]:
    """`count` due events of one merchant, all waiting for a task (as parked at enqueue)."""
    events = [enqueue(merchant, no=f"C2026000000{i:04d}") for i in range(count)]
    CallbackEvent.objects.filter(pk__in=[e.pk for e in events]).update(dispatched_at=None)
    return events


@pytest.mark.django_db
@override_settings(CALLBACK_DRAIN_MAX_EVENTS=5, CALLBACK_DRAIN_MAX_SECONDS=60)
def test_one_task_delivers_its_merchants_waiting_events_up_to_the_count_bound_then_hands_over(
        hooked_merchant, callback_receiver, enqueue, dispatched):
    events = _parked(hooked_merchant, enqueue, 7)

    tasks.deliver_callback(events[0].pk)

    delivered = [r.body["platform_order_no"] for r in callback_receiver.requests]
    assert delivered == [e.platform_order_no for e in events[:5]]  # oldest due first, one attempt each
    assert dispatched == [events[5].pk]  # at the bound: the next waiting event gets a task of its own
    states = dict(CallbackEvent.objects.values_list("pk", "status"))
    assert [states[e.pk] for e in events] == ["delivered"] * 5 + ["pending"] * 2
    assert CallbackEvent.objects.get(pk=events[5].pk).dispatched_at is not None
    assert CallbackEvent.objects.get(pk=events[6].pk).dispatched_at is None

    tasks.deliver_callback(events[5].pk)  # that task drains the rest; nothing left to hand over
    assert CallbackEvent.objects.filter(status="delivered").count() == 7 and dispatched == [events[5].pk]


@pytest.mark.django_db
@override_settings(CALLBACK_DRAIN_MAX_EVENTS=50, CALLBACK_DRAIN_MAX_SECONDS=0.5)
def test_the_time_bound_ends_a_drain(hooked_merchant, callback_receiver, enqueue, dispatched):
    callback_receiver.default = Reply(200, "success", delay=0.3)
    events = _parked(hooked_merchant, enqueue, 4)

    started = time.monotonic()
    tasks.deliver_callback(events[0].pk)

    assert len(callback_receiver.requests) == 2  # 0.3 s, then 0.6 s: past the 0.5 s bound, no third attempt
    assert time.monotonic() - started < 1.5
    assert dispatched == [events[2].pk]


@pytest.mark.django_db
def test_a_drain_takes_only_waiting_events_and_keeps_the_schedule(hooked_merchant, callback_receiver, enqueue,
                                                                   dispatched, clock):
    callback_receiver.default = Reply(500)
    first, queued, later = (enqueue(hooked_merchant, no=f"C202600000000{i}") for i in range(3))
    CallbackEvent.objects.filter(pk=later.pk).update(dispatched_at=None, next_attempt_at=clock.now.replace(year=2027))

    tasks.deliver_callback(first.pk)

    # `queued` has a task of its own on the way; `later` is not due: neither is attempted by this task.
    assert len(callback_receiver.requests) == 1
    assert CallbackEvent.objects.get(pk=queued.pk).attempts_count == 0
    assert CallbackEvent.objects.get(pk=later.pk).attempts_count == 0


@pytest.mark.django_db
@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=2)
def test_an_enqueue_queues_no_task_while_the_merchants_busy_tasks_will_drain_it(
        hooked_merchant, callback_receiver, django_capture_on_commit_callbacks, monkeypatch):
    queued = []
    monkeypatch.setattr(tasks.deliver_callback, "delay", lambda event_id: queued.append(event_id))
    events = []
    for i in range(4):
        with django_capture_on_commit_callbacks(execute=True):
            with transaction.atomic():
                no = f"C202600000000{i}"
                events.append(callback_enqueue(merchant=hooked_merchant, type=CallbackEvent.Type.COLLECTION_SUCCESS,
                                               platform_order_no=no, payload=collection_success_payload(paid_order(no))))

    assert queued == [events[0].pk, events[1].pk]  # as many tasks as bulkhead slots
    assert list(CallbackEvent.objects.filter(pk__in=[events[2].pk, events[3].pk])
                .values_list("dispatched_at", flat=True)) == [None, None]  # parked: waiting for those tasks

    for event_id in list(queued):
        tasks.deliver_callback(event_id)

    assert CallbackEvent.objects.filter(status="delivered").count() == 4 and len(callback_receiver.requests) == 4
    assert len(queued) == 2  # no task was needed for the parked events


@pytest.mark.django_db
@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=1)
def test_the_sweeper_still_queues_a_parked_event_whose_drainer_was_lost(hooked_merchant, enqueue, dispatched):
    busy, parked = enqueue(hooked_merchant, no="C20260000000001"), enqueue(hooked_merchant, no="C20260000000002")
    services.callback_attempt_claim(event_id=busy.pk)  # ... and that worker dies
    CallbackEvent.objects.filter(pk=parked.pk).update(dispatched_at=None)
    with override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=2):
        assert callbacks_sweep() == [parked.pk]  # a free slot: queued at the next sweep


def _threaded_broker(monkeypatch, pool: ThreadPoolExecutor) -> None:
    """deliver_callback.delay runs the task in a pool thread (own DB connection): a broker with `pool` workers."""

    def run(event_id):
        try:
            tasks.deliver_callback(event_id)
        finally:
            connection.close()

    monkeypatch.setattr(tasks.deliver_callback, "delay", lambda event_id: pool.submit(run, event_id))


def _wait_until(predicate, timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def _enqueue_committed(merchant, no: str) -> CallbackEvent:
    with transaction.atomic():
        return callback_enqueue(merchant=merchant, type=CallbackEvent.Type.COLLECTION_SUCCESS, platform_order_no=no,
                                payload=collection_success_payload(paid_order(no)))


@pytest.mark.django_db(transaction=True)
def test_concurrent_enqueues_while_tasks_drain_lose_no_event_without_the_sweeper(hooked_merchant, callback_receiver,
                                                                                monkeypatch):
    callback_receiver.default = Reply(200, "success", delay=0.01)
    pool = ThreadPoolExecutor(max_workers=8)
    _threaded_broker(monkeypatch, pool)
    try:
        def producer(k: int) -> None:
            try:
                for i in range(15):
                    _enqueue_committed(hooked_merchant, f"C2026{k:02d}{i:08d}")
                    time.sleep(0.005 * (k % 3))
            finally:
                connection.close()

        producers = [threading.Thread(target=producer, args=(k,)) for k in range(4)]
        [t.start() for t in producers]
        [t.join(timeout=60) for t in producers]
        # No sweeper runs here: every event is delivered by a queued task or by a busy task that drained it.
        _wait_until(lambda: CallbackEvent.objects.filter(status="delivered").count() == 60, timeout=30)
    finally:
        pool.shutdown(wait=True)
    assert len(callback_receiver.requests) == 60
    assert CallbackEvent.objects.filter(attempts_count=1).count() == 60


@pytest.mark.django_db(transaction=True)
def test_a_merchant_with_a_stalled_endpoint_does_not_delay_another_while_its_tasks_drain(
        hooked_merchant, other_merchant, callback_receiver, monkeypatch):
    stalled = CallbackReceiver().start()
    stalled.default = Reply(200, "success", delay=2)
    slow = other_merchant.merchant
    slow.collection_callback_url = stalled.url
    slow.save(update_fields=["collection_callback_url"])
    pool = ThreadPoolExecutor(max_workers=8)  # fewer threads than the slow merchant's backlog
    _threaded_broker(monkeypatch, pool)
    try:
        for i in range(12):
            _enqueue_committed(slow, f"CSLOW{i:010d}")
        stalled.wait_for(4, timeout=5)
        latencies = []
        for i in range(3):
            before = len(callback_receiver.requests)
            enqueued = time.time()
            _enqueue_committed(hooked_merchant, f"CFINE{i:010d}")
            [hit] = callback_receiver.wait_for(before + 1, timeout=5)[before:]
            latencies.append(hit.at - enqueued)
            time.sleep(0.5)
        assert max(latencies) < 1.0, latencies
    finally:
        pool.shutdown(wait=True)
        stalled.stop()
    starts = sorted(r.at for r in stalled.requests)
    assert len(starts) > 4 and max(sum(1 for s in starts if t - 1.9 < s <= t) for t in starts) <= 4  # bulkhead held
