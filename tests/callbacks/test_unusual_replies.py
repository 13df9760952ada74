"""Replies the platform cannot take as they come (an unknown charset, a NUL, a lone surrogate) and attempts that
raise: each is one attempt, recorded with its outcome, and the event follows the schedule of docs/api.md, "Callbacks"
to the end (dead after nine), never a lease left behind that the sweeper re-dispatches forever."""

from datetime import timedelta

import pytest

from apps.callbacks import deliver
from apps.callbacks.deliver import callback_attempt_claim, callback_attempt_record, callback_deliver, lease_seconds
from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.callbacks.sweep import LOST_ERROR, callbacks_sweep
from apps.callbacks.transport import post_callback
from tests.support.receiver import Reply

DELAYS = [15, 60, 300, 1800, 7200, 21600, 43200, 86400]


def _text(charset: str) -> dict:
    return {"Content-Type": f"text/plain; charset={charset}"}


@pytest.mark.parametrize("charset", ["bogus", "base64"])
def test_success_under_an_unknown_charset_is_read_as_utf8_and_delivered(hooked_merchant, callback_receiver, enqueue,
                                                                       charset):
    callback_receiver.script(Reply(200, "success", headers=_text(charset)))
    event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    attempt = event.attempts.get()
    assert event.status == CallbackEvent.Status.DELIVERED and event.locked_until is None
    assert attempt.success and attempt.response_excerpt == "success" and attempt.finished_at is not None


@pytest.mark.parametrize("reply,excerpt,error", [
    (Reply(500, "down for maintenance", headers=_text("bogus")), "down for maintenance", "HTTP 500"),
    (Reply(200, "success\x00"), "success\ufffd", "reply is not 'success'"),
    (Reply(200, "ok\x00\x00", headers=_text("base64")), "ok\ufffd\ufffd", "reply is not 'success'"),
    (Reply(200, "+2AA-", headers=_text("utf-7")), "\ufffd", "reply is not 'success'"),  # decodes to a lone surrogate
    (Reply(200, "\\udc80 success", headers=_text("unicode_escape")), "\ufffd success", "reply is not 'success'"),
])
def test_a_reply_that_cannot_be_stored_as_is_is_a_failed_attempt_kept_sanitized(
        hooked_merchant, callback_receiver, enqueue, clock, reply, excerpt, error):
    callback_receiver.script(reply)
    event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    attempt = event.attempts.get()
    assert (attempt.success, attempt.http_status, attempt.response_excerpt) == (False, reply.status, excerpt)
    assert error in attempt.error and attempt.finished_at == clock.now
    assert event.status == CallbackEvent.Status.PENDING and event.locked_until is None
    assert event.next_attempt_at == attempt.finished_at + timedelta(seconds=15) and event.last_error == attempt.error


def test_a_merchant_answering_nul_nine_times_gets_nine_attempts_then_the_event_is_dead(
        hooked_merchant, callback_receiver, enqueue, clock):
    callback_receiver.default = Reply(200, "success\x00")
    event = enqueue(hooked_merchant)
    for delay in DELAYS:
        event = callback_deliver(event_id=event.pk)
        assert event.status == CallbackEvent.Status.PENDING
        clock.advance(delay)
    event = callback_deliver(event_id=event.pk)
    assert (event.status, event.attempts_count, event.locked_until) == (CallbackEvent.Status.DEAD, 9, None)
    clock.advance(7 * 86400)
    assert callback_deliver(event_id=event.pk) is None
    assert len(callback_receiver.requests) == 9


def test_an_attempt_that_raises_is_a_failed_attempt_on_the_schedule(hooked_merchant, callback_receiver, enqueue,
                                                                     clock, monkeypatch):
    def broken_transport(url, body):
        raise RuntimeError("codec exploded")

    monkeypatch.setattr(deliver, "post_callback", broken_transport)
    event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    attempt = event.attempts.get()
    assert not attempt.success and attempt.finished_at == clock.now
    assert attempt.error == "the attempt failed unexpectedly: codec exploded"
    assert event.status == CallbackEvent.Status.PENDING and event.locked_until is None
    assert event.next_attempt_at == clock.now + timedelta(seconds=15)


def test_attempts_whose_worker_was_lost_count_and_the_ninth_makes_the_event_dead(hooked_merchant, enqueue, clock,
                                                                                dispatched):
    event = enqueue(hooked_merchant)
    for number, delay in enumerate([*DELAYS, None], start=1):
        claim = callback_attempt_claim(event_id=event.pk)  # ... and the worker is lost before recording
        assert claim.number == number
        clock.advance(lease_seconds())
        lease_end = clock.now
        callbacks_sweep()
        event.refresh_from_db()
        lost = event.attempts.get(number=number)
        assert (lost.finished_at, lost.error, lost.success) == (lease_end, LOST_ERROR, False)
        assert event.locked_until is None and event.last_error == LOST_ERROR
        if delay is None:
            break
        assert event.status == CallbackEvent.Status.PENDING
        assert event.next_attempt_at == lease_end + timedelta(seconds=delay)  # the schedule, from the lease's end
        clock.advance(delay - 1)
        assert callbacks_sweep() == [] and callback_attempt_claim(event_id=event.pk) is None  # not due yet
        clock.advance(1)
        assert callbacks_sweep() == [event.pk]
    assert (event.status, event.attempts_count, event.next_attempt_at) == (CallbackEvent.Status.DEAD, 9, None)
    clock.advance(7 * 86400)
    assert callbacks_sweep() == [] and callback_attempt_claim(event_id=event.pk) is None


def test_a_late_success_after_the_lease_was_counted_lost_marks_the_event_delivered(
        hooked_merchant, callback_receiver, enqueue, clock, dispatched):
    event = enqueue(hooked_merchant)
    claim = callback_attempt_claim(event_id=event.pk)
    clock.advance(lease_seconds())
    callbacks_sweep()  # counted as lost, retry scheduled
    result = post_callback(claim.url, claim.body)  # the slow worker was alive after all
    event = callback_attempt_record(claim=claim, result=result)
    assert event.status == CallbackEvent.Status.DELIVERED and event.attempts_count == 1
    assert event.attempts.get().success and event.next_attempt_at is None


def test_a_failure_after_a_late_success_leaves_the_event_delivered(hooked_merchant, callback_receiver, enqueue, clock,
                                                                   dispatched):
    event = enqueue(hooked_merchant)
    slow = callback_attempt_claim(event_id=event.pk)  # a worker that turns out to be only slow
    clock.advance(lease_seconds())
    callbacks_sweep()  # attempt 1 counted as lost
    clock.advance(15)
    retry = callback_attempt_claim(event_id=event.pk)
    callback_attempt_record(claim=slow, result=post_callback(slow.url, slow.body))  # attempt 1 was delivered after all
    callback_receiver.default = Reply(500)
    event = callback_attempt_record(claim=retry, result=post_callback(retry.url, retry.body))
    assert (event.status, event.locked_until, event.next_attempt_at) == (CallbackEvent.Status.DELIVERED, None, None)
    assert [a.success for a in event.attempts.order_by("number")] == [True, False]


def test_a_worker_lost_before_its_batch_is_recorded_keeps_the_outcomes_of_the_attempts_answered_meanwhile(
        hooked_merchant, callback_receiver, enqueue, clock, dispatched, monkeypatch):
    # Two attempts of the batch are answered at once (200 and 500), the third four seconds later: the first two are
    # written once the batch has been open TOGETHER_SECONDS (1 s), not when the slowest ends. The worker is lost
    # before the batch's record: it loses only the slow one, and the sweeper applies the written outcomes when the
    # leases run out.
    callback_receiver.script(Reply(200, "success"), Reply(500, "down"), Reply(200, "success", delay=4))
    events = [enqueue(hooked_merchant, no=f"C2026010100000{n}abc") for n in range(3)]

    def lost(**kwargs):
        raise RuntimeError("worker lost before the batch's record")

    monkeypatch.setattr(deliver, "callback_attempts_record", lost)
    with pytest.raises(RuntimeError):
        callback_deliver(event_id=events[0].pk)
    answered_at = clock.now
    attempts = {a.event_id: a for a in CallbackAttempt.objects.filter(event__in=events)}
    assert sorted((a.http_status or 0, a.finished_at is not None) for a in attempts.values()) == [
        (0, False), (200, True), (500, True)]

    clock.advance(lease_seconds())
    lease_end = clock.now
    callbacks_sweep()
    outcomes = set()
    for event in events:
        event.refresh_from_db()
        attempt = attempts[event.pk]
        assert event.locked_until is None and event.attempts_count == 1
        if attempt.success:
            assert (event.status, event.delivered_at, event.next_attempt_at) == (
                CallbackEvent.Status.DELIVERED, answered_at, None)
        elif attempt.http_status == 500:
            # The schedule goes on from the end of the answered attempt, with its own error, not "worker lost".
            assert (event.status, event.last_error, event.next_attempt_at) == (
                CallbackEvent.Status.PENDING, "HTTP 500", answered_at + timedelta(seconds=DELAYS[0]))
        else:  # in flight when the worker was lost
            assert (event.status, event.last_error, event.next_attempt_at) == (
                CallbackEvent.Status.PENDING, LOST_ERROR, lease_end + timedelta(seconds=DELAYS[0]))
        outcomes.add(event.status)
    assert outcomes == {CallbackEvent.Status.DELIVERED, CallbackEvent.Status.PENDING}
    assert len(callback_receiver.requests) == 3  # the delivered one is not sent again
