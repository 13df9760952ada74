"""Sandbox refunds end to end (docs/api.md, "Sandbox channel", "Refunds"): a real Celery worker answers the refund,
and the signed refund callback reaches a real local HTTP server once."""

import time

import pytest
from django.test import Client

from apps.collection.models import Refund
from apps.ledger.selectors import ledger_verify
from tests.callbacks.merchant_side import merchant_verifies
from tests.collection.conftest import balances
from tests.collection.test_refunds import paid_order
from tests.conftest import make_merchant
from tests.helpers import assert_ok, signed_post
from tests.support.wait import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shop(bootstrapped, rsa_keys, callback_receiver, live_celery_worker):
    return make_merchant(rsa_keys[2], name="Refund Shop", collection_callback_url=callback_receiver.url)


def refund_callbacks(receiver, refund_no: str) -> list[dict]:
    return [r.body for r in receiver.requests if r.body and r.body.get("refund_no") == refund_no]


def finished(refund_no: str, status: str) -> Refund:
    return wait_until(lambda: (r := Refund.objects.get(refund_no=refund_no)).status == status and r,
                      what=f"refund {refund_no} {status}")


def test_a_sandbox_refund_succeeds_and_its_signed_callback_arrives_once(shop, callback_receiver):
    order = paid_order(Client(), shop, amount=100_000)
    data = assert_ok(signed_post(Client(), shop, "/openapi/v1/refund/create",
                                 {"mch_order_no": order.mch_order_no, "mch_refund_no": "RF-1", "amount": 30_000}))
    refund = finished(data["refund_no"], "SUCCESS")
    [callback] = wait_until(lambda: refund_callbacks(callback_receiver, refund.refund_no),
                            what="the refund callback")
    assert merchant_verifies(callback)
    business = {k: v for k, v in callback.items() if k not in ("key_version", "timestamp", "nonce", "sign_type",
                                                                "sign")}
    assert business == {"event": "refund.terminal", "mch_refund_no": "RF-1", "refund_no": refund.refund_no,
                        "mch_order_no": order.mch_order_no, "platform_order_no": order.platform_order_no,
                        "currency": "PHP", "amount": 30_000, "status": "SUCCESS",
                        "finished_at": int(refund.finished_at.timestamp())}
    assert refund.upstream_reference == f"SBXR{refund.refund_no}"
    assert balances(shop) == {"available": 70_000, "settling": 0, "frozen": 0}
    time.sleep(1)  # a second delivery would have come by now
    assert len(refund_callbacks(callback_receiver, refund.refund_no)) == 1
    assert ledger_verify()["ok"]


def test_a_sandbox_refund_of_an_amount_ending_in_99_fails_and_its_amount_comes_back(shop, callback_receiver):
    order = paid_order(Client(), shop, amount=100_000)
    data = assert_ok(signed_post(Client(), shop, "/openapi/v1/refund/create",
                                 {"mch_order_no": order.mch_order_no, "mch_refund_no": "RF-99", "amount": 1_099}))
    refund = finished(data["refund_no"], "FAILED")
    assert refund.fail_reason == "the sandbox fails every refund whose amount ends in 99"
    [callback] = wait_until(lambda: refund_callbacks(callback_receiver, refund.refund_no),
                            what="the refund callback")
    assert merchant_verifies(callback)
    assert (callback["status"], callback["fail_reason"]) == ("FAILED", refund.fail_reason)
    assert balances(shop) == {"available": 100_000, "settling": 0, "frozen": 0}
    queried = assert_ok(signed_post(Client(), shop, "/openapi/v1/refund/query", {"refund_no": refund.refund_no}))
    assert (queried["status"], queried["refundable"]) == ("FAILED", 100_000)


def test_a_paid_order_refunded_in_two_parts_takes_no_third_and_every_refund_is_called_back_once(shop,
                                                                                               callback_receiver):
    from django.core.management import call_command

    order = paid_order(Client(), shop, amount=100_000)  # ₱1,000.00
    numbers = []
    for mch_refund_no, amount in (("RF-300", 30_000), ("RF-700", 70_000)):
        data = assert_ok(signed_post(Client(), shop, "/openapi/v1/refund/create",
                                     {"mch_order_no": order.mch_order_no, "mch_refund_no": mch_refund_no,
                                      "amount": amount}))
        numbers.append(data["refund_no"])
    assert data["refundable"] == 0
    status, body = signed_post(Client(), shop, "/openapi/v1/refund/create",
                               {"mch_order_no": order.mch_order_no, "mch_refund_no": "RF-1", "amount": 100})
    assert (status, body["code"]) == (422, "2008")
    for number in numbers:
        finished(number, "SUCCESS")
    wait_until(lambda: all(refund_callbacks(callback_receiver, number) for number in numbers),
               what="both refund callbacks")
    time.sleep(1)
    assert [len(refund_callbacks(callback_receiver, number)) for number in numbers] == [1, 1]
    assert balances(shop) == {"available": 0, "settling": 0, "frozen": 0}
    call_command("verify_ledger", stdout=open("/dev/null", "w"))  # exits non-zero on any broken invariant
