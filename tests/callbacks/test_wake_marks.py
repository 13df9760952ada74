"""A merchant's wake marks (docs/callbacks.md, "Batches and wake marks"): an enqueue queues a delivery task only while
one of the merchant's CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT marks is free, and a task's release frees them all."""

import pytest
from django.test import override_settings
from redis.connection import AbstractConnection

from apps.callbacks.enqueue import callback_dispatch, callback_wake_release


@pytest.fixture
def redis_round_trips(monkeypatch):
    """Commands sent to Redis (each a round trip; a pipeline or a script counts once)."""
    sent = []
    send = AbstractConnection.send_packed_command

    def counting(self, command, check_health=True):
        sent.append(command)
        return send(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counting)
    return sent


@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=4)
def test_an_enqueue_queues_a_task_only_while_one_of_its_merchants_marks_is_free(dispatched):
    assert all(callback_dispatch(event_id=i, merchant_id=7) for i in range(6))
    assert dispatched == [0, 1, 2, 3]  # one task per mark; the fifth and sixth events are theirs to deliver
    assert callback_dispatch(event_id=10, merchant_id=8) and dispatched[-1] == 10  # another merchant's marks
    callback_wake_release(merchant_id=7)  # a task's end: every mark of the merchant freed at once
    assert [callback_dispatch(event_id=i, merchant_id=7) for i in (20, 21)] == [True, True]
    assert dispatched == [0, 1, 2, 3, 10, 20, 21]


@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=4)
def test_an_enqueue_whose_merchants_marks_are_all_taken_costs_one_redis_round_trip(dispatched, redis_round_trips):
    for i in range(5):  # the first also loads the script into Redis
        callback_dispatch(event_id=i, merchant_id=7)
    assert dispatched == [0, 1, 2, 3]
    redis_round_trips.clear()
    assert callback_dispatch(event_id=5, merchant_id=7)
    assert dispatched == [0, 1, 2, 3] and len(redis_round_trips) == 1  # was one SET NX per mark: four
