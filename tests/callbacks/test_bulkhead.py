"""A slow merchant holds at most CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT worker slots, so other merchants' callbacks
are not delayed; its own callbacks wait for a slot and none is lost (docs/callbacks.md, Bulkhead)."""

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connection, transaction
from django.test import override_settings

from apps.callbacks import tasks
from apps.callbacks.deliver import callback_attempt_claim, callback_attempt_record, callback_deliver
from apps.callbacks.enqueue import callback_enqueue, collection_success_payload
from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.callbacks.sweep import callbacks_sweep
from apps.callbacks.transport import PostResult
from tests.callbacks.conftest import paid_order
from tests.support.receiver import Reply
from tests.support.wait import wait_until

pytestmark = pytest.mark.django_db


@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=2)
def test_a_claim_beyond_the_merchants_cap_is_refused_and_waits_for_a_slot(hooked_merchant, enqueue, dispatched,
                                                                         callback_receiver):
    events = [enqueue(hooked_merchant, no=f"C2026000000000{i}") for i in range(3)]
    assert callback_attempt_claim(event_id=events[0].pk) is not None
    assert callback_attempt_claim(event_id=events[1].pk) is not None

    assert callback_deliver(event_id=events[2].pk) is None
    waiting = CallbackEvent.objects.get(pk=events[2].pk)
    assert (waiting.status, waiting.attempts_count, waiting.dispatched_at) == ("pending", 0, None)
    assert callback_receiver.requests == []


@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=2)
def test_another_merchant_is_not_limited_by_a_busy_one(hooked_merchant, other_merchant, enqueue, dispatched,
                                                       callback_receiver):
    busy = [enqueue(hooked_merchant, no=f"C2026000000000{i}") for i in range(2)]
    for event in busy:
        callback_attempt_claim(event_id=event.pk)
    other = other_merchant.merchant
    other.collection_callback_url = callback_receiver.url
    other.save(update_fields=["collection_callback_url"])

    event = callback_deliver(event_id=enqueue(other, no="C20260000000009").pk)
    assert event.status == CallbackEvent.Status.DELIVERED


@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=1)
def test_a_finished_attempt_hands_its_slot_to_the_merchants_next_waiting_event(
        hooked_merchant, enqueue, dispatched, callback_receiver, django_capture_on_commit_callbacks):
    first, second = enqueue(hooked_merchant, no="C20260000000001"), enqueue(hooked_merchant, no="C20260000000002")
    claim = callback_attempt_claim(event_id=first.pk)
    assert callback_deliver(event_id=second.pk) is None  # refused: the merchant's one slot is taken

    with django_capture_on_commit_callbacks(execute=True):
        callback_attempt_record(claim=claim, result=PostResult(200, "success", "", 1))

    assert dispatched == [second.pk]  # queued once the record commits, not at the next sweep
    assert callback_deliver(event_id=second.pk).status == CallbackEvent.Status.DELIVERED


@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=2)
def test_the_sweeper_queues_no_more_of_a_merchants_events_than_its_free_slots(hooked_merchant, enqueue, dispatched):
    events = [enqueue(hooked_merchant, no=f"C2026000000000{i}") for i in range(5)]
    CallbackEvent.objects.update(dispatched_at=None)  # as after lost dispatches
    callback_attempt_claim(event_id=events[0].pk)  # one slot busy
    dispatched.clear()

    callbacks_sweep()

    assert dispatched == [events[1].pk]  # the oldest waiting one


@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=1)
def test_a_waiting_event_is_queued_by_the_sweeper_once_a_lost_workers_lease_is_counted(
        hooked_merchant, enqueue, dispatched, clock):
    busy, waiting = enqueue(hooked_merchant, no="C20260000000001"), enqueue(hooked_merchant, no="C20260000000002")
    callback_attempt_claim(event_id=busy.pk)  # ... and that worker is lost: no record hands its slot over
    assert callback_deliver(event_id=waiting.pk) is None
    dispatched.clear()
    assert callbacks_sweep() == []  # the slot is still leased
    clock.advance(120)  # the lease (120 s) has run out

    assert callbacks_sweep() == [waiting.pk]


# ------------------------------------------------------------------------ with tasks running in threads

def _threaded_broker(monkeypatch, pool: ThreadPoolExecutor) -> None:
    """deliver_callback.delay runs the task in a pool thread (own DB connection): a worker with `pool` slots."""

    def run(event_id):
        try:
            tasks.deliver_callback(event_id)
        finally:
            connection.close()

    monkeypatch.setattr(tasks.deliver_callback, "delay", lambda event_id: pool.submit(run, event_id))


def _enqueue_committed(merchant, no: str) -> CallbackEvent:
    with transaction.atomic():
        return callback_enqueue(merchant=merchant, type=CallbackEvent.Type.COLLECTION_SUCCESS, platform_order_no=no,
                                payload=collection_success_payload(paid_order(no)))


class StalledEndpoint:
    """A merchant endpoint that takes callbacks and answers none of them until released (then `success`)."""

    def __init__(self):
        self.arrived: list[str] = []
        self.released = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.arrived.append(body["platform_order_no"])
                endpoint.released.wait(60)
                self.send_response(200)
                self.send_header("Content-Length", "7")
                self.end_headers()
                self.wfile.write(b"success")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/callback"

    def stop(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.django_db(transaction=True)
def test_a_merchant_with_a_stalled_endpoint_holds_at_most_its_slots_and_delays_no_one(
        hooked_merchant, other_merchant, callback_receiver, monkeypatch, settings):
    settings.CALLBACK_TIMEOUT_SECONDS = 60  # no stalled attempt ends while the test runs
    stalled = StalledEndpoint()
    slow = other_merchant.merchant
    slow.collection_callback_url = stalled.url
    slow.save(update_fields=["collection_callback_url"])
    pool = ThreadPoolExecutor(max_workers=8)  # fewer slots than the slow merchant's backlog
    _threaded_broker(monkeypatch, pool)
    try:
        for i in range(12):
            _enqueue_committed(slow, f"CSLOW{i:010d}")
        wait_until(lambda: len(stalled.arrived) >= 4, what="the slow merchant's first four attempts")
        for i in range(3):
            _enqueue_committed(hooked_merchant, f"CFINE{i:010d}")
            # Without the bulkhead, all 8 slots would hang in the slow merchant's calls until released.
            callback_receiver.wait_for(i + 1, timeout=20)
        assert len(stalled.arrived) == 4 and CallbackAttempt.objects.filter(event__merchant=slow).count() == 4
    finally:
        stalled.stop()
        pool.shutdown(wait=True)


@pytest.mark.django_db(transaction=True)
@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=4)
def test_a_burst_for_one_merchant_is_delivered_once_each_without_the_sweeper(hooked_merchant, callback_receiver,
                                                                             monkeypatch):
    callback_receiver.default = Reply(200, "success", delay=0.01)
    pool = ThreadPoolExecutor(max_workers=8)  # more slots than the merchant's cap: claims are refused and wait
    _threaded_broker(monkeypatch, pool)
    try:
        def producer(k: int) -> None:
            try:
                for i in range(15):
                    _enqueue_committed(hooked_merchant, f"C2026{k:02d}{i:08d}")
            finally:
                connection.close()

        producers = [threading.Thread(target=producer, args=(k,)) for k in range(4)]
        [t.start() for t in producers]
        [t.join(timeout=60) for t in producers]
        # No sweeper runs here: every refused event is handed a slot by the record that freed one.
        wait_until(lambda: CallbackEvent.objects.filter(status="delivered").count() == 60, timeout=60,
                   what="all 60 callbacks delivered")
    finally:
        pool.shutdown(wait=True)
    assert len(callback_receiver.requests) == 60
    assert CallbackEvent.objects.filter(attempts_count=1).count() == 60
