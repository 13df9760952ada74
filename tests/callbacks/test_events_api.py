"""Self-serve callback events: POST /openapi/v1/callbacks/list and /callbacks/resend, signed requests
against the real database, re-sends delivered to the real local receiver."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from apps.callbacks.api.serializers import encode_cursor
from apps.callbacks.deliver import callback_deliver
from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.callbacks.resend import callback_resend_by_merchant
from apps.common.errors import DomainError, ErrorCode
from apps.common.models import AuditLog
from tests.callbacks.merchant_side import merchant_verifies
from tests.helpers import assert_error, assert_ok, at_once, post_json, scrape, signed_post, value
from tests.support.receiver import Reply

LIST, RESEND = "/openapi/v1/callbacks/list", "/openapi/v1/callbacks/resend"
T = CallbackEvent.Type
S = CallbackEvent.Status


def listed(client, ctx, **params) -> dict:
    return assert_ok(signed_post(client, ctx, LIST, params))


def numbers(data: dict) -> list[str]:
    return [event["platform_order_no"] for event in data["events"]]


def set_state(event: CallbackEvent, **fields) -> CallbackEvent:
    CallbackEvent.objects.filter(pk=event.pk).update(**fields)
    event.refresh_from_db()
    return event


@pytest.fixture
def dead_event(hooked_merchant, callback_receiver, enqueue, settings, dispatched):
    """One failed attempt that was the last one: a dead event with a real first body."""
    settings.CALLBACK_RETRY_DELAYS_SECONDS = []
    callback_receiver.script(Reply(500, "boom"))
    event = callback_deliver(event_id=enqueue(hooked_merchant, no="C1").pk)
    assert event.status == S.DEAD
    settings.CALLBACK_RETRY_DELAYS_SECONDS = [15, 60, 300, 1800, 7200, 21600, 43200, 86400]
    return event


@pytest.fixture
def other_event(other_merchant, enqueue, dispatched):
    return set_state(enqueue(other_merchant.merchant, no="C9"), status=S.DEAD, next_attempt_at=None)


# --- list ------------------------------------------------------------------------------------------------

def test_list_never_shows_another_merchants_events_not_even_by_their_order_number(
        client, merchant, hooked_merchant, enqueue, other_event, dispatched):
    mine = enqueue(hooked_merchant, no="C1")
    assert numbers(listed(client, merchant)) == ["C1"]
    assert listed(client, merchant, platform_order_no="C9") == {"events": [], "next_cursor": None}
    assert listed(client, merchant, status="dead") == {"events": [], "next_cursor": None}
    # A cursor above every id still shows only the caller's events: the query is scoped first.
    assert numbers(listed(client, merchant, cursor=encode_cursor(max(mine.pk, other_event.pk) + 1))) == ["C1"]


def test_list_shows_attempts_and_the_exact_body_of_the_last_attempt(client, merchant, dead_event, callback_receiver):
    data = listed(client, merchant)
    [event] = data["events"]
    sent = callback_receiver.requests[-1].body
    assert event["body"] == sent and merchant_verifies(event["body"])
    assert {k: event[k] for k in ("event_id", "type", "platform_order_no", "status", "attempts_count")} == {
        "event_id": dead_event.pk, "type": "collection.success", "platform_order_no": "C1", "status": "dead",
        "attempts_count": 1}
    [attempt] = event["attempts"]
    assert attempt["number"] == 1 and attempt["http_status"] == 500 and attempt["success"] is False
    assert attempt["manual"] is False and attempt["key_version"] == sent["key_version"]
    assert "HTTP 500" in attempt["error"] and event["last_error"] == attempt["error"]
    assert attempt["finished_at"] >= attempt["started_at"] and attempt["duration_ms"] >= 0
    assert event["created_at"] == int(dead_event.created_at.timestamp()) and event["next_attempt_at"] is None


def test_an_event_without_attempts_has_a_null_body(client, merchant, hooked_merchant, enqueue, dispatched):
    enqueue(hooked_merchant, no="C1")
    [event] = listed(client, merchant)["events"]
    assert event["body"] is None and event["attempts"] == [] and event["status"] == "pending"


def test_list_filters_by_order_number_type_status_and_creation_time(client, merchant, hooked_merchant, enqueue,
                                                                   dispatched):
    base = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    rows = [("C1", T.COLLECTION_SUCCESS, S.PENDING, 0), ("P1", T.PAYOUT_TERMINAL, S.DEAD, 10),
            ("P1", T.PAYOUT_REVERSED, S.DELIVERED, 20), ("C2", T.COLLECTION_SUCCESS, S.DEAD, 30)]
    for no, type_, status, offset in rows:
        event = enqueue(hooked_merchant, no=no, type=type_, payload={"platform_order_no": no, "n": offset})
        set_state(event, status=status, created_at=base + timedelta(seconds=offset, microseconds=500_000))
    start = int(base.timestamp())
    assert numbers(listed(client, merchant)) == ["C2", "P1", "P1", "C1"]
    assert [e["type"] for e in listed(client, merchant, platform_order_no="P1")["events"]] == [
        "payout.reversed", "payout.terminal"]
    assert numbers(listed(client, merchant, type="collection.success")) == ["C2", "C1"]
    assert numbers(listed(client, merchant, status="dead")) == ["C2", "P1"]
    assert numbers(listed(client, merchant, status="dead", type="payout.terminal")) == ["P1"]
    # Both ends inclusive, at second resolution: created_to covers the whole of its second.
    assert numbers(listed(client, merchant, created_from=start + 10, created_to=start + 20)) == ["P1", "P1"]
    assert numbers(listed(client, merchant, created_from=start + 11)) == ["C2", "P1"]
    assert numbers(listed(client, merchant, created_to=start)) == ["C1"]
    assert numbers(listed(client, merchant, created_from=start + 31)) == []


def test_pages_are_newest_first_and_the_cursor_is_stable_under_inserts(client, merchant, hooked_merchant, enqueue,
                                                                       dispatched):
    for i in range(5):
        enqueue(hooked_merchant, no=f"C{i}")
    first = listed(client, merchant, limit=2)
    assert numbers(first) == ["C4", "C3"] and first["next_cursor"]
    enqueue(hooked_merchant, no="C5")  # arrives between two pages: it shifts nothing
    second = listed(client, merchant, limit=2, cursor=first["next_cursor"])
    assert numbers(second) == ["C2", "C1"]
    third = listed(client, merchant, limit=2, cursor=second["next_cursor"])
    assert numbers(third) == ["C0"] and third["next_cursor"] is None
    assert numbers(listed(client, merchant))[:2] == ["C5", "C4"]  # default limit 20: everything, newest first
    assert len(listed(client, merchant, limit=100)["events"]) == 6


@pytest.mark.parametrize("params, field", [
    ({"limit": 0}, "limit"), ({"limit": 101}, "limit"), ({"limit": "20"}, "limit"), ({"limit": True}, "limit"),
    ({"cursor": "not-a-cursor"}, "cursor"), ({"cursor": "Y2IxOjQy "}, "cursor"), ({"cursor": "Y2IxOjQy\n"}, "cursor"),
    ({"cursor": "Y2IxOjA"}, "cursor"), ({"cursor": "x" * 65}, "cursor"), ({"cursor": 42}, "cursor"),
    ({"type": "collection"}, "type"), ({"type": "collection.success "}, "type"), ({"type": 1}, "type"),
    ({"status": "DEAD"}, "status"), ({"status": "dead\n"}, "status"), ({"status": "failed"}, "status"),
    ({"platform_order_no": "C1 "}, "platform_order_no"), ({"platform_order_no": "C-1"}, "platform_order_no"),
    ({"created_from": "1700000000"}, "created_from"), ({"created_from": -1}, "created_from"),
    ({"created_to": 2**53}, "created_to"), ({"created_from": 20, "created_to": 10}, "created_to"),
])
def test_list_refuses_bad_input_with_1000_naming_the_field(client, merchant, params, field):
    body = assert_error(signed_post(client, merchant, LIST, params), "1000", 400)
    assert body["msg"].startswith(f"{field}:"), body


def test_list_accepts_the_largest_time_range(client, merchant):
    assert listed(client, merchant, created_from=0, created_to=253402300799) == {"events": [], "next_cursor": None}


def test_list_is_signed_like_every_endpoint(client, merchant):
    body = merchant.signed_body({})
    body["limit"] = 5  # changed after signing
    assert_error(post_json(client, LIST, body), "1101", 401)


# --- resend ----------------------------------------------------------------------------------------------

def test_a_resend_goes_out_once_with_a_fresh_signature_and_is_audited(
        client, merchant, clock, dead_event, callback_receiver, dispatched, django_capture_on_commit_callbacks):
    clock.advance(60)
    with django_capture_on_commit_callbacks(execute=True):
        data = assert_ok(signed_post(client, merchant, RESEND, {"event_id": dead_event.pk}))
    assert data == {"event_id": dead_event.pk, "type": "collection.success", "platform_order_no": "C1",
                    "status": "pending", "attempts_count": 1, "next_attempt_at": int(clock.now.timestamp())}
    assert dispatched == [dead_event.pk]  # queued once, after commit

    event = callback_deliver(event_id=dead_event.pk)
    assert callback_deliver(event_id=dead_event.pk) is None  # nothing more to claim: exactly one extra attempt
    assert event.status == S.DELIVERED and event.attempts_count == 2
    first, resent = [r.body for r in callback_receiver.requests]
    assert len(callback_receiver.requests) == 2
    assert resent["timestamp"] != first["timestamp"] and resent["nonce"] != first["nonce"]
    assert resent["sign"] != first["sign"] and merchant_verifies(resent) and merchant_verifies(first)
    business = {k: v for k, v in first.items() if k not in ("timestamp", "nonce", "sign")}
    assert {k: v for k, v in resent.items() if k not in ("timestamp", "nonce", "sign")} == business
    assert CallbackAttempt.objects.get(event=event, number=2).manual is True

    audit = AuditLog.objects.get(action="callback.resend", object_id=str(dead_event.pk))
    assert audit.actor is None and audit.actor_label == merchant.merchant_no
    assert audit.old == {"status": "dead", "attempts_count": 1} and audit.new["status"] == "pending"

    [listed_event] = listed(client, merchant)["events"]
    assert listed_event["body"] == resent and [a["manual"] for a in listed_event["attempts"]] == [False, True]


def test_a_delivered_event_can_be_resent_by_order_number_and_type(client, merchant, hooked_merchant,
                                                                  callback_receiver, enqueue, dispatched):
    event = callback_deliver(event_id=enqueue(hooked_merchant, no="C1").pk)
    assert event.status == S.DELIVERED
    data = assert_ok(signed_post(client, merchant, RESEND, {"platform_order_no": "C1", "type": "collection.success"}))
    assert data["event_id"] == event.pk and data["status"] == "pending"
    event = callback_deliver(event_id=event.pk)
    assert event.status == S.DELIVERED and len(callback_receiver.requests) == 2


def test_a_resent_delivered_event_keeps_its_first_delivered_at_and_its_delivery_is_timed_once(
        client, merchant, hooked_merchant, callback_receiver, enqueue, dispatched, clock):
    text = scrape(client)
    timed = value(text, "payments_callback_delivery_seconds_count")
    delivered = value(text, "payments_callback_attempts_total", outcome="delivered")
    event = callback_deliver(event_id=enqueue(hooked_merchant, no="C1").pk)
    first_delivery = event.delivered_at
    clock.advance(3 * 3600)  # the merchant re-sends it hours later
    assert_ok(signed_post(client, merchant, RESEND, {"event_id": event.pk}))
    event = callback_deliver(event_id=event.pk)
    assert event.status == S.DELIVERED and len(callback_receiver.requests) == 2
    # delivered_at is the first success (docs/api.md, "Callback events: list and re-send"), in the database and in the
    # list
    assert event.delivered_at == first_delivery
    [listed_event] = listed(client, merchant)["events"]
    assert listed_event["delivered_at"] == int(first_delivery.timestamp())
    assert listed_event["attempts"][1]["started_at"] > listed_event["delivered_at"]
    # Two delivered attempts, one delivery: the re-send does not add the event's age to the delivery histogram.
    text = scrape(client)
    assert value(text, "payments_callback_attempts_total", outcome="delivered") == delivered + 2
    assert value(text, "payments_callback_delivery_seconds_count") == timed + 1


def test_a_dead_event_delivered_by_a_resend_has_its_first_delivery_timed(client, merchant, dead_event,
                                                                          callback_receiver):
    timed = value(scrape(client), "payments_callback_delivery_seconds_count")
    assert_ok(signed_post(client, merchant, RESEND, {"event_id": dead_event.pk}))
    event = callback_deliver(event_id=dead_event.pk)
    assert event.status == S.DELIVERED and event.delivered_at is not None
    assert value(scrape(client), "payments_callback_delivery_seconds_count") == timed + 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_resends_of_one_event_make_exactly_one_extra_attempt(hooked_merchant, dead_event, callback_receiver,
                                                                      dispatched):
    # Six requests at once (a merchant's retrying client, two operators' tabs): the event row's lock lets one in;
    # the others find it pending.
    queued_before = list(dispatched)  # the event's first delivery, queued at its enqueue's commit
    outcomes = at_once(lambda i: callback_resend_by_merchant(merchant=hooked_merchant, event_id=dead_event.pk), 6)
    refused = [exc for _, exc in outcomes if exc is not None]
    assert len(refused) == 5, outcomes
    assert all(isinstance(exc, DomainError) and exc.error == ErrorCode.DUPLICATE_ORDER for exc in refused), refused
    assert dispatched == [*queued_before, dead_event.pk]  # the re-send queued once
    assert AuditLog.objects.filter(action="callback.resend", object_id=str(dead_event.pk)).count() == 1
    assert callback_deliver(event_id=dead_event.pk).status == S.DELIVERED
    assert callback_deliver(event_id=dead_event.pk) is None
    assert len(callback_receiver.requests) == 2  # the first, failed attempt and the one re-send


def test_a_failed_resend_makes_the_event_dead_again_at_once(client, merchant, dead_event, callback_receiver):
    assert_ok(signed_post(client, merchant, RESEND, {"event_id": dead_event.pk}))
    callback_receiver.script(Reply(503, "down"))
    event = callback_deliver(event_id=dead_event.pk)
    assert event.status == S.DEAD and event.attempts_count == 2 and event.next_attempt_at is None


def test_a_pending_event_is_refused_with_2001_and_nothing_changes(client, merchant, hooked_merchant, enqueue,
                                                                  dispatched, django_capture_on_commit_callbacks):
    event = enqueue(hooked_merchant, no="C1")
    before = CallbackEvent.objects.filter(pk=event.pk).values().get()
    queued_before = list(dispatched)
    with django_capture_on_commit_callbacks(execute=True):
        body = assert_error(signed_post(client, merchant, RESEND, {"event_id": event.pk}), "2001", 409)
    assert "pending" in body["msg"] and "only delivered or dead" in body["msg"]
    assert CallbackEvent.objects.filter(pk=event.pk).values().get() == before
    assert dispatched == queued_before and not AuditLog.objects.filter(action="callback.resend").exists()
    assert_error(signed_post(client, merchant, RESEND, {"platform_order_no": "C1", "type": "collection.success"}),
                 "2001", 409)


def test_another_merchants_event_is_not_found_like_a_missing_one(client, merchant, hooked_merchant, other_event):
    by_id = assert_error(signed_post(client, merchant, RESEND, {"event_id": other_event.pk}), "2002", 404)
    missing = assert_error(signed_post(client, merchant, RESEND, {"event_id": other_event.pk + 1000}), "2002", 404)
    by_order = assert_error(signed_post(client, merchant, RESEND, {"platform_order_no": "C9",
                                                                   "type": "collection.success"}), "2002", 404)
    assert by_id == missing == by_order
    assert CallbackEvent.objects.get(pk=other_event.pk).status == S.DEAD
    assert not AuditLog.objects.filter(action="callback.resend").exists()


def test_the_owner_type_matters_a_payout_event_by_the_wrong_type_is_not_found(client, merchant, dead_event):
    assert_error(signed_post(client, merchant, RESEND, {"platform_order_no": "C1", "type": "payout.terminal"}),
                 "2002", 404)


def test_resends_are_rate_limited_per_merchant_with_1106(client, merchant, other_merchant, dead_event, other_event,
                                                         settings):
    settings.CALLBACK_RESEND_PER_MINUTE = 2
    assert_ok(signed_post(client, merchant, RESEND, {"event_id": dead_event.pk}))
    # A refused re-send spends the budget too (no probing of ids beyond the limit).
    assert_error(signed_post(client, merchant, RESEND, {"event_id": dead_event.pk}), "2001", 409)
    body = assert_error(signed_post(client, merchant, RESEND, {"event_id": dead_event.pk}), "1106", 429)
    assert "2 callback re-sends per minute" in body["msg"]
    assert AuditLog.objects.filter(action="callback.resend").count() == 1
    # Another merchant has a budget of its own; the list is not limited by it.
    assert_ok(signed_post(client, other_merchant, RESEND, {"event_id": other_event.pk}))
    listed(client, merchant)


@pytest.mark.parametrize("params, field", [
    ({}, "platform_order_no"), ({"platform_order_no": "C1"}, "type"), ({"type": "collection.success"},
                                                                       "platform_order_no"),
    ({"event_id": 1, "platform_order_no": "C1", "type": "collection.success"}, "request"),
    ({"event_id": 1, "type": "collection.success"}, "request"),
    ({"event_id": "1"}, "event_id"), ({"event_id": 0}, "event_id"), ({"event_id": 2**63}, "event_id"),
    ({"event_id": True}, "event_id"), ({"platform_order_no": "C1\n", "type": "collection.success"},
                                       "platform_order_no"),
    ({"platform_order_no": "C1", "type": "Collection.Success"}, "type"),
])
def test_resend_refuses_bad_input_with_1000_naming_the_field(client, merchant, dead_event, params, field):
    body = assert_error(signed_post(client, merchant, RESEND, params), "1000", 400)
    assert body["msg"].startswith(f"{field}:"), body
    assert CallbackEvent.objects.get(pk=dead_event.pk).status == S.DEAD


def test_both_endpoints_take_post_only(client, db):
    for path in (LIST, RESEND):
        response = client.get(path)
        assert response.status_code == 405 and response.json()["code"] == "1004"


def test_an_empty_string_is_absent_as_in_the_string_to_sign(client, merchant, hooked_merchant, enqueue, dispatched):
    enqueue(hooked_merchant, no="C1")
    assert numbers(listed(client, merchant, type="", status="", cursor="", platform_order_no="")) == ["C1"]


def test_resend_resets_nothing_else(client, merchant, dead_event):
    before = CallbackEvent.objects.get(pk=dead_event.pk)
    assert_ok(signed_post(client, merchant, RESEND, {"event_id": dead_event.pk}))
    after = CallbackEvent.objects.get(pk=dead_event.pk)
    assert (after.attempts_count, after.created_at, after.payload, after.delivered_at, after.last_error) == (
        before.attempts_count, before.created_at, before.payload, before.delivered_at, before.last_error)
    assert after.resend_requested and after.next_attempt_at <= timezone.now()


@pytest.mark.django_db(transaction=True)
def test_with_a_live_worker_a_resend_arrives_exactly_once_signed_afresh(client, merchant, hooked_merchant,
                                                                        callback_receiver, live_celery_worker,
                                                                        settings):
    import time

    from django.db import transaction

    from apps.callbacks.enqueue import callback_enqueue, collection_success_payload
    from tests.callbacks.conftest import paid_order
    from tests.support.wait import wait_until

    settings.CALLBACK_RETRY_DELAYS_SECONDS = []  # the first failure is the last attempt
    callback_receiver.script(Reply(500, "boom"))
    with transaction.atomic():
        event = callback_enqueue(merchant=hooked_merchant, type=T.COLLECTION_SUCCESS, platform_order_no="C1",
                                 payload=collection_success_payload(paid_order("C1")))
    wait_until(lambda: CallbackEvent.objects.get(pk=event.pk).status == S.DEAD, what="the event dead")
    time.sleep(1.1)  # the re-send's timestamp is a later second
    assert_ok(signed_post(client, merchant, RESEND, {"event_id": event.pk}))
    first, again = [r.body for r in callback_receiver.wait_for(2)]
    wait_until(lambda: CallbackEvent.objects.get(pk=event.pk).status == S.DELIVERED, what="the event delivered")
    time.sleep(1)
    assert len(callback_receiver.requests) == 2  # one extra attempt, not a new schedule
    assert again["timestamp"] > first["timestamp"] and again["nonce"] != first["nonce"]
    assert merchant_verifies(again) and again["platform_order_no"] == first["platform_order_no"] == "C1"
    assert AuditLog.objects.get(action="callback.resend").actor_label == merchant.merchant_no
