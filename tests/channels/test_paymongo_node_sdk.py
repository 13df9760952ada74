"""PayMongo's official SDK, paymongo-node (Node; pinned in tests/channels/paymongo_node), drives the emulator over
real HTTP: payments.retrieve, refunds.create / retrieve / all, an over-refund refused with 400, a wrong key with 401,
and webhooks.constructEvent on every webhook the emulator sent in the test, so the emulator's payments, refunds,
errors and signed events are what PayMongo's own client reads."""

import pytest

from apps.collection.refunds import refund_submit
from tests.channels.paymongo_node_sdk import node_sdk_run
from tests.channels.test_paymongo_refunds import paid_on_paymongo, refund_of, url

pytestmark = pytest.mark.django_db(transaction=True)


def test_paymongo_node_reads_the_emulators_payments_refunds_errors_and_webhooks(paymongo_channels, merchant,
                                                                                paymongo_emulator, live_server):
    order, payment = paid_on_paymongo(merchant, paymongo_emulator, live_server, amount=100_000)
    other, _ = paid_on_paymongo(merchant, paymongo_emulator, live_server, amount=20_000)
    ours, failing = refund_of(merchant, order, "RF-1", 30_000), refund_of(merchant, other, "RF-2", 5_000)
    for refund in (ours, failing):
        refund_submit(refund_id=refund.pk)
        refund.refresh_from_db()
    paymongo_emulator.settle_refund(ours.upstream_reference, "succeeded")
    paymongo_emulator.settle_refund(failing.upstream_reference, "failed")
    for refund in (ours, failing):
        assert paymongo_emulator.refund_webhook(refund.upstream_reference, url(live_server)).status_code == 200
    sent = list(paymongo_emulator.webhooks_sent)

    out = node_sdk_run({
        "url": paymongo_emulator.url, "secret_key": paymongo_emulator.secret_key,
        "webhook_secret": paymongo_emulator.webhook_secret, "payment_id": payment["id"],
        "refund": {"amount": 20_000, "reason": "requested_by_customer", "notes": "sent by paymongo-node",
                   "metadata": {"refund_no": "SDK-1"}},
        "over_amount": 50_001,  # 100,000 paid, 30,000 + 20,000 refunded: 50,000 left
        "webhooks": [{"payload": body.decode(), "header": header} for body, header in sent],
    })

    assert out["payment"] == {"id": payment["id"], "amount": 100_000, "currency": "PHP", "status": "paid",
                              "source": payment["attributes"]["source"], "fee": payment["attributes"]["fee"],
                              "net_amount": payment["attributes"]["net_amount"],
                              "refunds": [ours.upstream_reference]}
    created = out["created"]
    assert created["id"].startswith("ref_") and out["retrieved"] == created
    assert {k: created[k] for k in ("amount", "currency", "payment_id", "reason", "status", "notes", "metadata",
                                    "livemode")} == {
        "amount": 20_000, "currency": "PHP", "payment_id": payment["id"], "reason": "requested_by_customer",
        "status": "pending", "notes": "sent by paymongo-node", "metadata": {"refund_no": "SDK-1"}, "livemode": False}
    assert out["listed"]["has_more"] is False
    assert [(r["id"], r["status"]) for r in out["listed"]["data"]] == [
        (created["id"], "pending"), (ours.upstream_reference, "succeeded")]
    assert out["listed"]["data"][1]["metadata"] == {"refund_no": ours.refund_no,
                                                    "platform_order_no": order.platform_order_no}
    assert out["over_refund"]["refused"]["type"] == "InvalidRequestError"
    assert out["over_refund"]["refused"]["codes"] == ["parameter_above_maximum"]
    assert out["listed_after_over_refund"] == 2  # the refused one created nothing
    assert out["wrong_key"]["refused"] == {"type": "AuthenticationError", "codes": ["authentication_failed"],
                                           "details": ["The API key is invalid."]}

    events = out["webhooks"]
    assert [e["type"] for e in events] == ["checkout_session.payment.paid"] * 2 + ["payment.refunded",
                                                                                   "payment.refund.updated"]
    assert [e["resource_type"] for e in events] == ["checkout_session"] * 2 + ["payment"] * 2
    assert events[2]["resource_id"] == payment["id"] and events[3]["resource_id"] != payment["id"]
    assert {e["tampered"] for e in events} == {"SignatureVerificationError"}
