"""Success rule, failures and the retry schedule (docs/api.md, "Callbacks"), against a real local HTTP receiver."""

from datetime import timedelta

import pytest
from django.test import override_settings

from apps.callbacks.models import CallbackEvent
from apps.callbacks.deliver import callback_deliver
from apps.callbacks.resend import callback_resend
from apps.common.models import AuditLog
from tests.callbacks.conftest import closed_port_url
from tests.callbacks.merchant_side import merchant_verifies
from tests.support.receiver import Reply

DELAYS = [15, 60, 300, 1800, 7200, 21600, 43200, 86400]


def test_the_schedule_is_the_contracts():
    from django.conf import settings

    assert settings.CALLBACK_RETRY_DELAYS_SECONDS == DELAYS
    assert settings.CALLBACK_TIMEOUT_SECONDS == 10


@pytest.mark.parametrize("reply,expected_status,error_part", [
    (Reply(500, "success"), 500, "HTTP 500"),
    (Reply(200, "ok"), 200, "not 'success'"),
    (Reply(200, "SUCCESS"), 200, "not 'success'"),
    (Reply(200, '{"code": "success"}'), 200, "not 'success'"),
    (Reply(201, "success"), 201, "HTTP 201"),
    (Reply(302, "success", headers={"Location": "/callback/elsewhere"}), 302, "redirect"),
])
def test_a_reply_other_than_200_success_is_a_failure_retried_15s_after_the_attempt(
        hooked_merchant, callback_receiver, enqueue, clock, reply, expected_status, error_part):
    callback_receiver.script(reply)
    event = enqueue(hooked_merchant)
    event = callback_deliver(event_id=event.pk)
    assert len(callback_receiver.requests) == 1  # a redirect is not followed
    attempt = event.attempts.get()
    assert (attempt.number, attempt.success, attempt.http_status) == (1, False, expected_status)
    assert error_part in attempt.error
    assert attempt.response_excerpt == reply.body
    assert event.status == CallbackEvent.Status.PENDING
    assert event.next_attempt_at == attempt.finished_at + timedelta(seconds=15) == clock.now + timedelta(seconds=15)
    # Not due before its time: a duplicate or early task makes no request.
    clock.advance(14)
    assert callback_deliver(event_id=event.pk) is None
    clock.advance(1)
    assert callback_deliver(event_id=event.pk).status == CallbackEvent.Status.DELIVERED
    assert len(callback_receiver.requests) == 2


@pytest.mark.parametrize("body", ["success", " success", "success\n", "\r\n\t success \r\n"])
def test_success_with_surrounding_whitespace_is_delivered(hooked_merchant, callback_receiver, enqueue, body):
    callback_receiver.default = Reply(200, body)
    event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    assert event.status == CallbackEvent.Status.DELIVERED and event.delivered_at is not None
    assert event.next_attempt_at is None and event.attempts.get().success


def test_a_stall_longer_than_the_timeout_is_a_failure(hooked_merchant, callback_receiver, enqueue):
    # The code must use settings.CALLBACK_TIMEOUT_SECONDS (10 s in production); 1 s keeps the test fast.
    callback_receiver.script(Reply(200, "success", delay=60))
    with override_settings(CALLBACK_TIMEOUT_SECONDS=1):
        event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    attempt = event.attempts.get()
    assert not attempt.success and attempt.http_status is None
    assert attempt.error == "timeout after 1 s: the reply did not complete in time"
    assert 1000 <= attempt.duration_ms < 10_000  # cut at the deadline, not at the end of the stall
    assert event.next_attempt_at == attempt.finished_at + timedelta(seconds=15)


def test_a_closed_port_is_a_failure(hooked_merchant, enqueue, clock):
    hooked_merchant.collection_callback_url = closed_port_url()
    hooked_merchant.save()
    event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    attempt = event.attempts.get()
    assert not attempt.success and attempt.http_status is None
    assert attempt.error == "connection failed: connection refused"  # words, no class names
    assert event.next_attempt_at == clock.now + timedelta(seconds=15)


def test_no_callback_url_is_a_failed_attempt_on_the_schedule(merchant, enqueue, clock):
    event = callback_deliver(event_id=enqueue(merchant.merchant).pk)
    attempt = event.attempts.get()
    assert attempt.error == "no callback URL configured" and attempt.url == ""
    assert event.status == CallbackEvent.Status.PENDING
    assert event.next_attempt_at == clock.now + timedelta(seconds=15)


def test_a_url_configured_later_is_used_by_the_next_attempt(merchant, callback_receiver, enqueue, clock):
    event = callback_deliver(event_id=enqueue(merchant.merchant).pk)
    merchant.merchant.collection_callback_url = callback_receiver.url
    merchant.merchant.save()
    clock.advance(15)
    event = callback_deliver(event_id=event.pk)
    assert event.status == CallbackEvent.Status.DELIVERED and event.url == callback_receiver.url
    assert len(callback_receiver.requests) == 1


def test_nine_failed_attempts_make_the_event_dead_and_a_manual_resend_delivers_it(
        hooked_merchant, callback_receiver, enqueue, clock, admin_user):
    callback_receiver.default = Reply(503, "busy")
    event = enqueue(hooked_merchant)
    for number, delay in enumerate(DELAYS, start=1):
        event = callback_deliver(event_id=event.pk)
        assert event.attempts_count == number and event.status == CallbackEvent.Status.PENDING
        assert event.next_attempt_at == clock.now + timedelta(seconds=delay)
        clock.advance(delay - 1)
        assert callback_deliver(event_id=event.pk) is None  # one second early: not due
        clock.advance(1)
    event = callback_deliver(event_id=event.pk)
    assert event.attempts_count == 9 and event.status == CallbackEvent.Status.DEAD
    assert event.next_attempt_at is None and "HTTP 503" in event.last_error
    clock.advance(10 * 86400)
    assert callback_deliver(event_id=event.pk) is None  # dead: no more automatic attempts
    assert len(callback_receiver.requests) == 9

    callback_receiver.default = Reply(200, "success")
    [resent] = callback_resend(event_ids=[event.pk], actor=admin_user)
    assert resent.status == CallbackEvent.Status.PENDING and resent.next_attempt_at == clock.now
    event = callback_deliver(event_id=event.pk)
    assert event.status == CallbackEvent.Status.DELIVERED and event.attempts_count == 10
    last = event.attempts.order_by("-number").first()
    assert last.manual and last.success and merchant_verifies(last.request_body)
    audit = AuditLog.objects.get(action="callback.resend", object_id=str(event.pk))
    assert audit.actor == admin_user and audit.old["status"] == "dead"


def test_a_failed_manual_resend_is_dead_again_at_once(hooked_merchant, callback_receiver, enqueue, clock, admin_user):
    event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    assert event.status == CallbackEvent.Status.DELIVERED
    callback_receiver.default = Reply(500)
    callback_resend(event_ids=[event.pk], actor=admin_user)
    event = callback_deliver(event_id=event.pk)
    assert event.status == CallbackEvent.Status.DEAD and event.attempts_count == 2
    assert event.delivered_at is not None  # the earlier delivery stays on record
    assert callback_deliver(event_id=event.pk) is None


def test_resend_leaves_pending_events_alone(hooked_merchant, callback_receiver, enqueue, admin_user):
    callback_receiver.default = Reply(500)
    event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    assert callback_resend(event_ids=[event.pk], actor=admin_user) == []
    event.refresh_from_db()
    assert event.next_attempt_at is not None and not event.resend_requested


def test_done_means_500_then_success_arrives_twice_15s_apart_both_signed(
        hooked_merchant, callback_receiver, enqueue, clock, admin_client):
    callback_receiver.script(Reply(500, "internal error"), Reply(200, "success"))
    event = enqueue(hooked_merchant)
    first_at = clock.now
    event = callback_deliver(event_id=event.pk)
    assert event.next_attempt_at == first_at + timedelta(seconds=15)
    clock.set(event.next_attempt_at)
    event = callback_deliver(event_id=event.pk)
    assert event.status == CallbackEvent.Status.DELIVERED
    first, second = event.attempts.order_by("number")
    assert (first.http_status, first.success, second.http_status, second.success) == (500, False, 200, True)
    assert second.started_at - first.started_at == timedelta(seconds=15)
    bodies = [r.body for r in callback_receiver.requests]
    assert bodies == [first.request_body, second.request_body]
    assert all(merchant_verifies(body) for body in bodies)
    assert bodies[1]["timestamp"] - bodies[0]["timestamp"] == 15
    # The admin shows both attempts.
    page = admin_client.get(f"/admin/callbacks/callbackevent/{event.pk}/change/").content.decode()
    assert "internal error" in page and page.count("callbackattempt/") >= 2


def test_the_reply_excerpt_is_bounded(hooked_merchant, callback_receiver, enqueue):
    callback_receiver.script(Reply(200, "x" * 20000))
    attempt = callback_deliver(event_id=enqueue(hooked_merchant).pk).attempts.get()
    assert not attempt.success and attempt.response_excerpt == "x" * 512
