"""Outbox semantics: dedup, dispatch after commit, sweeper recovery, leases, racing workers, a live worker."""

import time
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.callbacks import sweep, tasks
from apps.callbacks.deliver import callback_attempt_claim, callback_deliver
from apps.callbacks.enqueue import (
    callback_enqueue,
    collection_success_payload,
    payout_reversed_payload,
    payout_terminal_payload,
)
from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.callbacks.sweep import callbacks_sweep
from apps.common.models import Heartbeat
from tests.callbacks.conftest import paid_order
from tests.callbacks.merchant_side import merchant_verifies
from tests.helpers import at_once
from tests.support.receiver import Reply
from tests.support.wait import wait_until


def test_enqueueing_the_same_order_and_type_twice_yields_one_event(hooked_merchant, enqueue):
    # The services write an (order, type)'s event once, under the order's row lock; a second enqueue is a bug, refused
    # by the unique constraint, which rolls back the transaction that tried it (no savepoint: docs/callbacks.md).
    first = enqueue(hooked_merchant, no="C1")
    with pytest.raises(IntegrityError):
        enqueue(hooked_merchant, no="C1", payload={**first.payload, "amount": 1})
    [stored] = CallbackEvent.objects.filter(platform_order_no="C1")
    assert stored.pk == first.pk and stored.payload == first.payload


def test_a_second_enqueue_rolls_back_the_transaction_that_tried_it(hooked_merchant, enqueue):
    first = enqueue(hooked_merchant, no="C1")
    with pytest.raises(IntegrityError), transaction.atomic():
        CallbackEvent.objects.filter(pk=first.pk).update(attempts_count=7)  # the caller's own write before it
        callback_enqueue(merchant=hooked_merchant, type=CallbackEvent.Type.COLLECTION_SUCCESS, platform_order_no="C1",
                         payload=first.payload)
    assert CallbackEvent.objects.get(pk=first.pk).attempts_count == 0


def test_the_dedup_key_is_order_plus_type_so_a_reversal_is_not_dropped(hooked_merchant, enqueue):
    from tests.callbacks.test_bodies import payout

    terminal = enqueue(hooked_merchant, type=CallbackEvent.Type.PAYOUT_TERMINAL, no="P1",
                       payload=payout_terminal_payload(payout(platform_order_no="P1")))
    reversed_ = enqueue(hooked_merchant, type=CallbackEvent.Type.PAYOUT_REVERSED, no="P1",
                        payload=payout_reversed_payload(payout(platform_order_no="P1")))
    assert terminal.pk != reversed_.pk
    assert CallbackEvent.objects.filter(platform_order_no="P1").count() == 2


def test_enqueue_outside_a_transaction_is_refused(hooked_merchant):
    # pytest-django wraps the test in a transaction; leave it to see the guard.
    from django.db import connection as conn

    conn.in_atomic_block, saved = False, conn.in_atomic_block
    try:
        with pytest.raises(RuntimeError):
            callback_enqueue(merchant=hooked_merchant, type=CallbackEvent.Type.COLLECTION_SUCCESS,
                             platform_order_no="C1", payload={"a": 1})
    finally:
        conn.in_atomic_block = saved


@pytest.mark.parametrize("payload", [{"sign": "x"}, {"key_version": 3}, {"items": [1]}, {"rate": 1.5}])
def test_a_payload_that_cannot_be_signed_as_is_is_refused(hooked_merchant, enqueue, payload):
    with pytest.raises(ValueError):
        enqueue(hooked_merchant, payload={"platform_order_no": "C1", **payload})


def test_dispatch_happens_only_after_commit(hooked_merchant, django_capture_on_commit_callbacks, monkeypatch):
    queued = []
    monkeypatch.setattr(tasks.deliver_callback, "delay", lambda event_id: queued.append(event_id))
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with transaction.atomic():
            event = callback_enqueue(merchant=hooked_merchant, type=CallbackEvent.Type.COLLECTION_SUCCESS,
                                     platform_order_no="C1", payload=collection_success_payload(paid_order("C1")))
            assert queued == []
    assert len(callbacks) == 1 and queued == [event.pk]


def test_the_sweeper_dispatches_due_events_not_queued_recently_and_beats(hooked_merchant, callback_receiver, enqueue,
                                                                         clock, monkeypatch):
    queued = []
    monkeypatch.setattr(tasks.deliver_callback, "delay", lambda event_id: queued.append(event_id))
    event = enqueue(hooked_merchant)  # queued at enqueue (dispatched_at = now)
    assert callbacks_sweep() == [] and queued == []
    assert Heartbeat.objects.get(name="callbacks.sweeper").beat_at == clock.now
    clock.advance(31)  # the task queued at commit never ran (lost message, broker down...)
    assert callbacks_sweep() == [event.pk] and queued == [event.pk]
    assert callbacks_sweep() == []  # not queued again right away
    callback_receiver.default = Reply(500)
    callback_deliver(event_id=event.pk)
    clock.advance(14)
    assert callbacks_sweep() == []  # retry not due yet
    clock.advance(1)
    assert callbacks_sweep() == [event.pk]  # retry due: dispatched at once
    callback_receiver.default = Reply(200, "success")
    callback_deliver(event_id=event.pk)
    clock.advance(3600)
    assert callbacks_sweep() == [] and len(queued) == 2  # delivered events are never swept


def test_a_worker_lost_mid_delivery_leaves_a_lease_then_its_attempt_counts_as_failed(
        hooked_merchant, callback_receiver, enqueue, clock, monkeypatch):
    monkeypatch.setattr(tasks.deliver_callback, "delay", lambda event_id: None)
    event = enqueue(hooked_merchant)
    claim = callback_attempt_claim(event_id=event.pk)  # ... and the worker dies before the HTTP result is stored
    assert claim.number == 1
    clock.advance(119)
    assert callback_deliver(event_id=event.pk) is None  # leased: nobody else delivers meanwhile
    assert callbacks_sweep() == []
    clock.advance(1)  # the lease (120 s) has run out: attempt 1 failed then; the next one is due 15 s later
    assert callbacks_sweep() == []
    clock.advance(15)
    assert callbacks_sweep() == [event.pk]
    event = callback_deliver(event_id=event.pk)
    assert event.status == CallbackEvent.Status.DELIVERED and event.attempts_count == 2
    lost, delivered = event.attempts.order_by("number")
    assert "worker lost" in lost.error and not lost.success
    assert lost.finished_at == lost.started_at + timedelta(seconds=120)  # failed when its lease ran out
    assert delivered.success and merchant_verifies(delivered.request_body) and callback_receiver.requests


@pytest.mark.django_db(transaction=True)
def test_two_workers_racing_for_one_event_make_one_request_per_attempt(hooked_merchant, callback_receiver,
                                                                       monkeypatch):
    monkeypatch.setattr(tasks.deliver_callback, "delay", lambda event_id: None)
    callback_receiver.default = Reply(200, "success", delay=0.5)
    with transaction.atomic():
        event = callback_enqueue(merchant=hooked_merchant, type=CallbackEvent.Type.COLLECTION_SUCCESS,
                                 platform_order_no="C1", payload=collection_success_payload(paid_order("C1")))
    errors = [exc for _, exc in at_once(lambda i: tasks.deliver_callback(event.pk), 4, timeout=30) if exc]
    assert errors == []
    assert len(callback_receiver.requests) == 1
    event.refresh_from_db()
    assert event.status == CallbackEvent.Status.DELIVERED and event.attempts_count == 1
    assert CallbackAttempt.objects.filter(event=event).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_live_worker_delivers_right_after_commit(hooked_merchant, callback_receiver, live_celery_worker):
    with transaction.atomic():
        event = callback_enqueue(merchant=hooked_merchant, type=CallbackEvent.Type.COLLECTION_SUCCESS,
                                 platform_order_no="C1", payload=collection_success_payload(paid_order("C1")))
        time.sleep(0.3)
        assert callback_receiver.requests == []  # nothing leaves before commit
    [received] = callback_receiver.wait_for(1, timeout=15)
    assert merchant_verifies(received.body) and received.body["platform_order_no"] == "C1"
    wait_until(lambda: CallbackEvent.objects.get(pk=event.pk).status == CallbackEvent.Status.DELIVERED,
               what="the event recorded as delivered")


@pytest.mark.django_db(transaction=True)
def test_a_crash_between_commit_and_dispatch_is_recovered_by_the_sweeper(hooked_merchant, callback_receiver,
                                                                         live_celery_worker, monkeypatch):
    from kombu.exceptions import OperationalError

    def broker_down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to redis: Connection refused")

    with monkeypatch.context() as patched:
        patched.setattr(tasks.deliver_callback, "delay", broker_down)
        with transaction.atomic():
            event = callback_enqueue(merchant=hooked_merchant, type=CallbackEvent.Type.COLLECTION_SUCCESS,
                                     platform_order_no="C1", payload=collection_success_payload(paid_order("C1")))
    time.sleep(1)
    assert callback_receiver.requests == []  # committed, never dispatched
    assert CallbackEvent.objects.get(pk=event.pk).status == CallbackEvent.Status.PENDING
    # The broker is back; beat runs the sweeper (here: the task body, a little later than the re-queue window).
    dispatched = callbacks_sweep(now=timezone.now() + timedelta(seconds=31))
    assert dispatched == [event.pk]
    [received] = callback_receiver.wait_for(1, timeout=15)
    assert merchant_verifies(received.body)
    wait_until(lambda: CallbackEvent.objects.get(pk=event.pk).status == CallbackEvent.Status.DELIVERED,
               what="the event recorded as delivered")


def test_the_sweeper_task_runs_the_sweep(db, monkeypatch):
    calls = []
    monkeypatch.setattr(sweep, "callbacks_sweep", lambda **kw: calls.append(kw))
    tasks.sweep_due_deliveries()
    assert calls == [{}]
    assert tasks.deliver_callback.acks_late and tasks.sweep_due_deliveries.acks_late

