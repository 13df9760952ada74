"""The ORM claim/record path that SQLite (the embedded default of `make run`) uses, run here on PostgreSQL so it
does not rot: the same lease, retry schedule, lost-lease and bulkhead rules as the PostgreSQL path."""

from datetime import timedelta

import pytest
from django.db import connection

from apps.callbacks import services, tasks
from apps.callbacks.models import CallbackEvent
from apps.callbacks.portable import callback_attempt_claim_portable, callback_deliver_portable
from tests.callbacks.merchant_side import merchant_verifies
from tests.support.receiver import Reply

pytestmark = pytest.mark.django_db


def test_portable_path_delivers_a_signed_callback_and_schedules_retries(hooked_merchant, callback_receiver, enqueue,
                                                                         clock, monkeypatch):
    monkeypatch.setattr(tasks.deliver_callback, "delay", lambda event_id: None)
    event = enqueue(hooked_merchant)
    callback_receiver.default = Reply(500)
    event = callback_deliver_portable(event_id=event.pk)
    assert (event.status, event.attempts_count, event.locked_until) == (CallbackEvent.Status.PENDING, 1, None)
    assert event.next_attempt_at == clock.now + timedelta(seconds=15)  # the first retry delay
    assert callback_deliver_portable(event_id=event.pk) is None  # the retry is not due yet
    clock.advance(15)
    callback_receiver.default = Reply(200, "success")
    event = callback_deliver_portable(event_id=event.pk)
    assert event.status == CallbackEvent.Status.DELIVERED and event.attempts_count == 2
    failed, delivered = event.attempts.order_by("number")
    assert failed.http_status == 500 and not failed.success
    assert delivered.success and merchant_verifies(delivered.request_body)


def test_portable_claim_closes_a_lost_attempt_and_respects_the_bulkhead(hooked_merchant, callback_receiver, enqueue,
                                                                          clock, monkeypatch, settings):
    monkeypatch.setattr(tasks.deliver_callback, "delay", lambda event_id: None)
    settings.CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT = 1
    first = enqueue(hooked_merchant, no="C1")
    second = enqueue(hooked_merchant, no="C2")
    assert callback_attempt_claim_portable(event_id=first.pk).number == 1  # its worker then dies
    assert callback_attempt_claim_portable(event_id=second.pk) is None  # the one slot is taken
    second.refresh_from_db()
    assert second.dispatched_at is None  # waits for the slot
    clock.advance(121)  # the lease ran out
    event = callback_deliver_portable(event_id=first.pk)
    assert event.status == CallbackEvent.Status.DELIVERED and event.attempts_count == 2
    lost = event.attempts.get(number=1)
    assert lost.error == services.LOST_ERROR and lost.finished_at is not None


def test_callback_deliver_takes_the_portable_path_off_postgresql(hooked_merchant, callback_receiver, enqueue,
                                                                monkeypatch):
    monkeypatch.setattr(tasks.deliver_callback, "delay", lambda event_id: None)
    event = enqueue(hooked_merchant)
    monkeypatch.setattr(connection, "vendor", "sqlite")
    taken = []
    monkeypatch.setattr("apps.callbacks.portable.callback_deliver_portable",
                        lambda *, event_id: taken.append(event_id))
    services.callback_deliver(event_id=event.pk)
    assert taken == [event.pk]
