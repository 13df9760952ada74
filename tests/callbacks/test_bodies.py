"""Bodies of the three callback types (docs/api.md, "Callbacks") and their signatures, checked as a merchant would."""

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from apps.callbacks.models import CallbackEvent
from apps.callbacks.deliver import callback_deliver
from apps.callbacks.enqueue import collection_success_payload, payout_reversed_payload, payout_terminal_payload
from apps.merchants.services import platform_key_rotate
from tests.callbacks.conftest import paid_order
from tests.callbacks.merchant_side import merchant_verifies, published_platform_keys
from tests.support.receiver import Reply

SIGNING = {"key_version", "timestamp", "nonce", "sign_type", "sign"}


def payout(status="SUCCESS", **overrides):
    fields = dict(platform_order_no="P20260101000000xyz", mch_order_no="W-9", amount=50000, fee=1000,
                  currency_id="PHP", status=status, fail_reason="account closed" if status == "FAILED" else "",
                  attach="secret-ish", finished_at=datetime(2026, 1, 3, tzinfo=UTC),
                  reversed_at=datetime(2026, 1, 4, 5, 6, 7, tzinfo=UTC), reversal_amount=50000, fee_refund=1000)
    fields.update(overrides)
    return SimpleNamespace(**fields)


def test_collection_success_payload_has_exactly_the_interface_fields():
    assert collection_success_payload(paid_order()) == {
        "platform_order_no": "C20260101000000abc", "mch_order_no": "M-1", "amount": 12345, "currency": "PHP",
        "status": "SUCCESS", "paid_at": int(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()),
        "attach": "order=7",
    }


def test_collection_payload_takes_a_currency_object_and_no_attach():
    order = SimpleNamespace(platform_order_no="C1", mch_order_no="M", amount=1, currency=SimpleNamespace(code="USD"),
                            paid_at=datetime(2026, 1, 1, tzinfo=UTC), attach="")
    body = collection_success_payload(order)
    assert body["currency"] == "USD" and body["attach"] == "" and body["paid_at"] == 1767225600


def test_payout_terminal_success_has_no_finished_at_attach_or_fail_reason():
    assert payout_terminal_payload(payout("SUCCESS")) == {
        "platform_order_no": "P20260101000000xyz", "mch_order_no": "W-9", "amount": 50000, "fee": 1000,
        "currency": "PHP", "status": "SUCCESS",
    }


@pytest.mark.parametrize("status,reason", [("FAILED", "account closed"), ("REJECTED", "risk: deny list")])
def test_payout_terminal_failure_carries_fail_reason(status, reason):
    body = payout_terminal_payload(payout(status, fail_reason=reason))
    assert body["status"] == status and body["fail_reason"] == reason
    assert "finished_at" not in body and "attach" not in body and "event" not in body


def test_payout_terminal_refuses_a_non_terminal_payout():
    with pytest.raises(ValueError):
        payout_terminal_payload(payout("PROCESSING"))


def test_payout_reversed_payload_has_event_and_no_status():
    assert payout_reversed_payload(payout("SUCCESS", reversal_amount=40000, fee_refund=0)) == {
        "event": "payout.reversed", "reversed_at": int(datetime(2026, 1, 4, 5, 6, 7, tzinfo=UTC).timestamp()),
        "platform_order_no": "P20260101000000xyz", "mch_order_no": "W-9", "amount": 50000, "fee": 1000,
        "currency": "PHP", "reversal_amount": 40000, "fee_refund": 0,
    }


@pytest.mark.parametrize("type,payload", [
    (CallbackEvent.Type.COLLECTION_SUCCESS, collection_success_payload(paid_order("C1"))),
    (CallbackEvent.Type.PAYOUT_TERMINAL, payout_terminal_payload(payout("FAILED", platform_order_no="C1"))),
    (CallbackEvent.Type.PAYOUT_REVERSED, payout_reversed_payload(payout(platform_order_no="C1"))),
])
def test_each_callback_type_arrives_signed_with_its_business_fields(hooked_merchant, callback_receiver, enqueue,
                                                                    type, payload):
    event = enqueue(hooked_merchant, type=type, no="C1", payload=payload)
    assert callback_deliver(event_id=event.pk).status == CallbackEvent.Status.DELIVERED
    [received] = callback_receiver.requests
    assert received.headers["Content-Type"].startswith("application/json")
    body = received.body
    assert set(body) == set(payload) | SIGNING
    assert {k: body[k] for k in payload} == payload
    assert body["sign_type"] == "RSA2" and body["key_version"] == 1
    assert merchant_verifies(body)
    assert not merchant_verifies({**body, "amount": body["amount"] + 1})
    # What the admin shows as sent is what arrived.
    assert event.attempts.get().request_body == body


def test_retries_keep_business_fields_and_resign_with_fresh_timestamp_and_nonce(hooked_merchant, callback_receiver,
                                                                                  enqueue, clock):
    callback_receiver.script(Reply(500))
    event = enqueue(hooked_merchant)
    callback_deliver(event_id=event.pk)
    clock.advance(15)
    callback_deliver(event_id=event.pk)
    first, second = (r.body for r in callback_receiver.requests)
    business = set(first) - SIGNING
    assert {k: first[k] for k in business} == {k: second[k] for k in business} == event.payload
    assert second["timestamp"] == first["timestamp"] + 15
    assert first["nonce"] != second["nonce"] and first["sign"] != second["sign"]
    assert merchant_verifies(first) and merchant_verifies(second)


def test_after_platform_key_rotation_attempts_carry_the_new_version(hooked_merchant, callback_receiver, enqueue,
                                                                    clock):
    callback_receiver.script(Reply(500))
    event = enqueue(hooked_merchant)
    callback_deliver(event_id=event.pk)
    platform_key_rotate()
    clock.advance(16)
    callback_deliver(event_id=event.pk)
    first, second = (r.body for r in callback_receiver.requests)
    keys = published_platform_keys()
    assert first["key_version"] == 1 and second["key_version"] == 2 and set(keys) == {1, 2}
    assert merchant_verifies(first, keys[1]) and not merchant_verifies(first, keys[2])
    assert merchant_verifies(second, keys[2]) and not merchant_verifies(second, keys[1])
    assert list(event.attempts.values_list("key_version", flat=True)) == [1, 2]


def test_a_rotation_written_without_the_service_is_seen_by_the_next_attempt(hooked_merchant, callback_receiver,
                                                                            enqueue, clock):
    # The platform key is cached reference data (apps.common.refcache): a write by any means (a queryset update, as
    # raw SQL or another process would do, which sends no Django signal) bumps the generation the next claim reads.
    from apps.common import crypto, signing
    from apps.merchants.models import PlatformKey

    callback_receiver.script(Reply(500))
    event = enqueue(hooked_merchant)
    callback_deliver(event_id=event.pk)
    private_key = signing.generate_private_key()
    PlatformKey.objects.filter(is_current=True).update(is_current=False)
    PlatformKey.objects.bulk_create([PlatformKey(
        version=7, public_key_pem=signing.public_key_to_pem(private_key.public_key()),
        private_key_encrypted=crypto.encrypt(signing.private_key_to_pem(private_key)), is_current=True)])
    clock.advance(16)
    callback_deliver(event_id=event.pk)
    first, second = (r.body for r in callback_receiver.requests)
    assert first["key_version"] == 1 and second["key_version"] == 7
    assert merchant_verifies(second, published_platform_keys()[7])
