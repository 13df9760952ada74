"""Replies the platform cannot take as they come (an unknown charset, a NUL, a lone surrogate) and attempts that
raise: each is one attempt, recorded with its outcome, and the event follows the schedule of contract §6 to the
end (dead after nine), never a lease left behind that the sweeper re-dispatches forever."""

from datetime import timedelta

import pytest

from apps.callbacks.models import CallbackEvent
from apps.callbacks.services import callback_deliver
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
