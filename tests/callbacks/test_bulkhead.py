"""A slow merchant holds at most CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT worker slots (docs/callbacks.md)."""

import pytest
from django.test import override_settings
from django.utils import timezone

from apps.callbacks import services
from apps.callbacks.models import CallbackEvent
from apps.callbacks.services import callback_attempt_claim, callback_deliver, callbacks_sweep

pytestmark = pytest.mark.django_db


@pytest.fixture
def dispatched(monkeypatch):
    """Event ids handed to the broker (recorded instead of queued, so the test drives each attempt itself)."""
    ids: list[int] = []
    monkeypatch.setattr(services, "callback_dispatch", lambda *, event_id: ids.append(event_id) or True)
    return ids


@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=2)
def test_a_claim_beyond_the_merchants_cap_is_refused_and_waits_for_a_slot(hooked_merchant, enqueue, dispatched):
    events = [enqueue(hooked_merchant, no=f"C2026000000000{i}") for i in range(3)]
    assert callback_attempt_claim(event_id=events[0].pk) is not None
    assert callback_attempt_claim(event_id=events[1].pk) is not None

    assert callback_attempt_claim(event_id=events[2].pk) is None
    waiting = CallbackEvent.objects.get(pk=events[2].pk)
    assert (waiting.status, waiting.attempts_count, waiting.dispatched_at) == ("pending", 0, None)


@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=2)
def test_another_merchant_is_not_limited_by_a_busy_one(hooked_merchant, other_merchant, enqueue, dispatched,
                                                       callback_receiver):
    busy = [enqueue(hooked_merchant, no=f"C2026000000000{i}") for i in range(2)]
    for event in busy:
        callback_attempt_claim(event_id=event.pk)
    other = other_merchant.merchant
    other.collection_callback_url = callback_receiver.url
    other.save(update_fields=["collection_callback_url"])

    assert callback_attempt_claim(event_id=enqueue(other, no="C20260000000009").pk) is not None


@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=1)
def test_a_finished_attempt_hands_its_slot_to_the_merchants_next_waiting_event(hooked_merchant, enqueue, dispatched,
                                                                               callback_receiver):
    first, second = enqueue(hooked_merchant, no="C20260000000001"), enqueue(hooked_merchant, no="C20260000000002")
    claim = callback_attempt_claim(event_id=first.pk)
    assert callback_attempt_claim(event_id=second.pk) is None  # refused: the merchant's one slot is taken
    dispatched.clear()

    services.callback_attempt_record(claim=claim, http_status=200, reply="success", error="", duration_ms=1,
                                     success=True)
    services.dispatch_waiting(merchant_id=hooked_merchant.pk, now=timezone.now(), slots=1)  # as callback_deliver does
    assert dispatched == [second.pk]
    assert callback_deliver(event_id=second.pk).status == "delivered"


@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=2)
def test_the_sweeper_queues_no_more_of_a_merchants_events_than_its_free_slots(hooked_merchant, enqueue, dispatched):
    events = [enqueue(hooked_merchant, no=f"C2026000000000{i}") for i in range(5)]
    CallbackEvent.objects.update(dispatched_at=None)  # as after lost dispatches
    callback_attempt_claim(event_id=events[0].pk)  # one slot busy
    dispatched.clear()

    callbacks_sweep()

    assert len(dispatched) == 1
