"""Callbacks the platform really delivers (outbox → signed POST to a local receiver), verified with the SDK,
across a platform key rotation; the handler, the WSGI app and the Django view answer `success` only when valid."""

import json
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest
from django.core.management import call_command
from django.test import RequestFactory

import payments_merchant as pm
from apps.callbacks.deliver import callback_deliver
from apps.callbacks.enqueue import payout_reversed_payload, payout_terminal_payload
from apps.callbacks.models import CallbackEvent
from tests.callbacks.test_bodies import payout
from tests.sdk.conftest import platform_public_keys
from tests.support.receiver import Reply


def delivered_bodies(receiver) -> list[bytes]:
    return [r.raw for r in receiver.requests]


@pytest.fixture
def rotated_callbacks(hooked_merchant, callback_receiver, enqueue, clock):
    """One collection callback delivered twice: signed with platform key 1, then (after `rotate_platform_key`,
    on the retry) with key 2. Returns the two raw bodies as they arrived."""
    callback_receiver.script(Reply(500))
    event = enqueue(hooked_merchant)
    callback_deliver(event_id=event.pk)
    call_command("rotate_platform_key", stdout=open("/dev/null", "w"))
    clock.advance(16)
    callback_deliver(event_id=event.pk)
    first, second = delivered_bodies(callback_receiver)
    assert (json.loads(first)["key_version"], json.loads(second)["key_version"]) == (1, 2)
    return first, second


def test_callbacks_signed_before_and_after_rotation_both_verify_with_both_keys(rotated_callbacks):
    keys = platform_public_keys()
    assert set(keys) == {1, 2}
    for raw, version in zip(rotated_callbacks, (1, 2)):
        event = pm.verify_callback(raw, keys)
        assert isinstance(event, pm.CollectionSuccess)
        assert (event.key_version, event.status, event.amount, event.currency) == (version, "SUCCESS", 12345, "PHP")
        assert event.mch_order_no == "M-1" and event.attach == "order=7" and isinstance(event.paid_at, int)
        assert pm.verify_callback(json.loads(raw), keys) == event  # a parsed dict verifies the same


def test_unknown_key_version_and_tampered_bodies_are_refused(rotated_callbacks):
    keys = platform_public_keys()
    first, second = rotated_callbacks
    with pytest.raises(pm.CallbackVerificationError, match="key_version 2"):
        pm.verify_callback(second, {1: keys[1]})  # a merchant that has not stored the new key yet
    with pytest.raises(pm.CallbackVerificationError):
        pm.verify_callback(first, {1: keys[2], 2: keys[1]})  # a key stored under the wrong version
    body = json.loads(first)
    for field, value in (("amount", body["amount"] + 1), ("mch_order_no", "M-2"), ("key_version", 2),
                         ("attach", ""), ("sign_type", "RSA"), ("sign", body["sign"][:-4] + "AAA=")):
        with pytest.raises(pm.CallbackVerificationError):
            pm.verify_callback({**body, field: value}, keys)
    for garbage in (b"", b"not json", b"[1, 2]", b'{"sign": 1}'):
        with pytest.raises(pm.CallbackVerificationError):
            pm.verify_callback(garbage, keys)


@pytest.mark.parametrize(("payload", "event_class"), [
    (payout_terminal_payload(payout("SUCCESS", platform_order_no="P1")), pm.PayoutTerminal),
    (payout_terminal_payload(payout("FAILED", platform_order_no="P1")), pm.PayoutTerminal),
    (payout_terminal_payload(payout("REJECTED", platform_order_no="P1", fail_reason="risk")), pm.PayoutTerminal),
    (payout_reversed_payload(payout("SUCCESS", platform_order_no="P1", reversal_amount=40000)), pm.PayoutReversed),
], ids=["terminal-success", "terminal-failed", "terminal-rejected", "reversed"])
def test_payout_callbacks_become_their_event_type(hooked_merchant, callback_receiver, enqueue, payload, event_class):
    kind = CallbackEvent.Type.PAYOUT_REVERSED if "event" in payload else CallbackEvent.Type.PAYOUT_TERMINAL
    callback_deliver(event_id=enqueue(hooked_merchant, type=kind, no="P1", payload=payload).pk)
    [raw] = delivered_bodies(callback_receiver)
    event = pm.verify_callback(raw, platform_public_keys())
    assert type(event) is event_class
    assert (event.platform_order_no, event.amount, event.fee) == ("P1", 50000, 1000)
    if isinstance(event, pm.PayoutReversed):
        assert (event.event, event.reversal_amount, event.fee_refund) == ("payout.reversed", 40000, 1000)
        assert isinstance(event.reversed_at, int)
    else:
        assert event.status == payload["status"]
        assert event.fail_reason == (payload.get("fail_reason") or None)


def test_a_refund_callback_becomes_a_refund_terminal_event(hooked_merchant, callback_receiver, enqueue):
    from types import SimpleNamespace

    from apps.callbacks.enqueue import refund_terminal_payload
    from tests.callbacks.conftest import paid_order

    refund = SimpleNamespace(mch_refund_no="RF-1", refund_no="R20260101000000abc", currency_id="PHP", amount=1099,
                             status="FAILED", fail_reason="closed", order=paid_order("C20260101000000abc"),
                             finished_at=paid_order("C1").paid_at)
    event = enqueue(hooked_merchant, type=CallbackEvent.Type.REFUND_TERMINAL, no=refund.refund_no,
                    payload=refund_terminal_payload(refund))
    callback_deliver(event_id=event.pk)
    [raw] = delivered_bodies(callback_receiver)
    received = pm.verify_callback(raw, platform_public_keys())
    assert type(received) is pm.RefundTerminal
    assert (received.event, received.refund_no, received.mch_refund_no, received.platform_order_no,
            received.amount, received.status, received.fail_reason) == (
        "refund.terminal", "R20260101000000abc", "RF-1", "C20260101000000abc", 1099, "FAILED", "closed")
    assert isinstance(received.finished_at, int)


def test_routing_uses_event_before_status():
    base = {"platform_order_no": "P1", "mch_order_no": "W", "amount": 1, "fee": 0, "currency": "PHP",
            "key_version": 1}
    reversed_with_a_status = {**base, "event": "payout.reversed", "status": "SUCCESS", "reversed_at": 1,
                              "reversal_amount": 1, "fee_refund": 0}
    assert isinstance(pm.parse_event(reversed_with_a_status), pm.PayoutReversed)
    with pytest.raises(pm.UnknownCallbackError):
        pm.parse_event({**base, "event": "payout.something_new"})
    with pytest.raises(pm.UnknownCallbackError):
        pm.parse_event({**base, "status": "PROCESSING"})


def test_handler_replies_success_only_when_verified_and_processed(rotated_callbacks):
    keys = platform_public_keys()
    first, _ = rotated_callbacks
    seen: list = []
    assert pm.handle_callback(first, keys, seen.append) == (200, "success")
    assert [e.platform_order_no for e in seen] == ["C20260101000000abc"]

    tampered = json.dumps({**json.loads(first), "amount": 1}).encode()
    status, reply = pm.handle_callback(tampered, keys, seen.append)
    assert status != 200 and reply != "success" and len(seen) == 1  # never processed

    def fails(event):
        raise RuntimeError("database down")

    status, reply = pm.handle_callback(first, keys, fails)
    assert status == 500 and reply != "success"


def test_django_view_helper_answers_the_platform(rotated_callbacks):
    keys = platform_public_keys()
    first, _ = rotated_callbacks
    seen: list = []
    view = pm.django_view(keys, seen.append)
    ok = view(RequestFactory().post("/cb", data=first, content_type="application/json"))
    assert (ok.status_code, ok.content) == (200, b"success") and len(seen) == 1
    bad = view(RequestFactory().post("/cb", data=first.replace(b'"M-1"', b'"M-9"'), content_type="application/json"))
    assert bad.status_code == 400 and bad.content != b"success" and len(seen) == 1
    assert view(RequestFactory().get("/cb")).status_code == 405


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def wsgi_receiver():
    """The SDK's WSGI app on a real local server; yields a function (public keys, on_event) -> URL."""
    servers = []

    def serve(public_keys, on_event) -> str:
        server = make_server("127.0.0.1", 0, pm.wsgi_app(public_keys, on_event), handler_class=QuietHandler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}/callback"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def test_wsgi_app_takes_the_platforms_real_delivery_and_refuses_a_key_version_it_lacks(merchant, enqueue,
                                                                                         wsgi_receiver):
    keys = platform_public_keys()
    seen: list = []
    merchant.merchant.collection_callback_url = wsgi_receiver(keys, seen.append)
    merchant.merchant.save(update_fields=["collection_callback_url"])
    event = callback_deliver(event_id=enqueue(merchant.merchant, no="C1").pk)
    assert event.status == CallbackEvent.Status.DELIVERED
    assert [(e.platform_order_no, type(e)) for e in seen] == [("C1", pm.CollectionSuccess)]

    # After a rotation, a merchant that has not stored key 2 yet never answers success: the event stays pending
    # for a retry (which succeeds once the merchant adds the key).
    call_command("rotate_platform_key", stdout=open("/dev/null", "w"))
    merchant.merchant.collection_callback_url = wsgi_receiver({1: keys[1]}, seen.append)
    merchant.merchant.save(update_fields=["collection_callback_url"])
    event = callback_deliver(event_id=enqueue(merchant.merchant, no="C2").pk)
    assert event.status == CallbackEvent.Status.PENDING and len(seen) == 1
    attempt = event.attempts.get()
    assert (attempt.http_status, attempt.key_version, attempt.success) == (400, 2, False)


def test_max_age_refuses_a_stale_callback_when_asked(rotated_callbacks, clock):
    keys = platform_public_keys()
    _, second = rotated_callbacks  # signed at the clock's present
    assert pm.verify_callback(second, keys, max_age_seconds=300).key_version == 2
    clock.advance(301)
    assert pm.verify_callback(second, keys).key_version == 2  # no age check unless asked
    with pytest.raises(pm.CallbackVerificationError, match="timestamp"):
        pm.verify_callback(second, keys, max_age_seconds=300)
