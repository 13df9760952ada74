"""Refunds through PayMongo (docs/channels.md, "PayMongo refunds") against the emulator over real HTTP: the refund of
a checkout session's paid payment, looked up by our refund_no before it is ever sent again, read back by the sweep
when its webhook is lost, refused at create (2007, nothing moved) when PayMongo's rules for the payment's method do
not allow it, and signed refund webhooks applied once."""

from datetime import timedelta

import pytest
import requests
from django.test import Client
from django.utils import timezone

from apps.callbacks.models import CallbackEvent
from apps.channels.base import LookupUnknown
from apps.channels.models import RefundRule, UpstreamPayin
from apps.channels.paymongo import PayMongoPayinAdapter
from apps.collection.models import CollectionOrder, Refund
from apps.collection.refunds import refund_create, refund_submit, refunds_sweep
from apps.common.errors import DomainError
from apps.ledger.models import Posting
from apps.ledger.selectors import ledger_verify
from tests.channels.conftest import (
    PAYMONGO_PAYIN_CODE,
    refund_amount_mismatches,
    refunds_stuck_a_minute_later,
)
from tests.collection.conftest import balances
from tests.collection.conftest import create_ok as pay_create_ok
from tests.helpers import at_once

pytestmark = pytest.mark.django_db(transaction=True)

AMOUNT = 150_000


def url(live_server) -> str:
    return f"{live_server.url}/channels/paymongo/{PAYMONGO_PAYIN_CODE}/webhook"


def paid_on_paymongo(merchant, emulator, live_server, *, method: str = "gcash",
                     amount: int = AMOUNT) -> tuple[CollectionOrder, dict]:
    """An order paid through its checkout session by `method`, the paid webhook applied; the session's payment."""
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=amount)
    assert Client().get(f"/pay/{order.pay_token}").status_code == 302
    [session] = emulator.sessions_by_reference(order.platform_order_no)
    emulator.pay_session(session["id"], method=method)
    assert emulator.session_webhook(session["id"], url(live_server)).json()["changed"] == "paid"
    order.refresh_from_db()
    [payment] = emulator.sessions[session["id"]]["attributes"]["payments"]
    return order, payment


def refund_of(merchant, order, mch_refund_no: str, amount: int, reason: str = "") -> Refund:
    return refund_create(merchant=merchant.merchant, platform_order_no=order.platform_order_no,
                         mch_refund_no=mch_refund_no, amount=amount, reason=reason)


def refund_posts(emulator) -> int:
    return sum(1 for method, path, *_ in emulator.requests if (method, path) == ("POST", "/v1/refunds"))


def callbacks_of(refund: Refund) -> int:
    return CallbackEvent.objects.filter(type=CallbackEvent.Type.REFUND_TERMINAL,
                                        platform_order_no=refund.refund_no).count()


def later() -> timezone.datetime:
    return timezone.now() + timedelta(minutes=5)


def test_the_payment_method_is_recorded_from_the_sessions_payment(paymongo_channels, merchant, paymongo_emulator,
                                                                 live_server):
    order, _ = paid_on_paymongo(merchant, paymongo_emulator, live_server, method="paymaya")
    assert UpstreamPayin.objects.get(platform_order_no=order.platform_order_no).payment_method == "paymaya"


def test_a_refund_is_created_for_the_sessions_payment_with_our_refund_no_and_a_paymongo_reason(
        paymongo_channels, merchant, paymongo_emulator, live_server):
    order, payment = paid_on_paymongo(merchant, paymongo_emulator, live_server)
    refund = refund_of(merchant, order, "RF-1", 40_000, reason="requested_by_customer")
    other = refund_of(merchant, order, "RF-2", 10_000, reason="the parcel came back damaged")
    reference = refund_submit(refund_id=refund.pk)
    refund_submit(refund_id=other.pk)
    upstream = paymongo_emulator.refunds[reference]["attributes"]
    assert (upstream["payment_id"], upstream["amount"], upstream["currency"], upstream["reason"]) == (
        payment["id"], 40_000, "PHP", "requested_by_customer")
    assert upstream["metadata"] == {"refund_no": refund.refund_no, "platform_order_no": order.platform_order_no}
    [second] = [r["attributes"] for r in paymongo_emulator.refunds_of(payment["id"]) if r["id"] != reference]
    assert (second["reason"], second["notes"]) == ("others", "the parcel came back damaged")
    refund.refresh_from_db()
    assert (refund.status, refund.upstream_reference) == ("PROCESSING", reference)
    # submitted again (a redelivered task): nothing is sent, the reference stays
    assert refund_submit(refund_id=refund.pk) is None
    assert refund_posts(paymongo_emulator) == 2
    assert PayMongoPayinAdapter().refund_state(refund=refund).outcome == "pending"


def test_a_create_that_timed_out_after_paymongo_took_it_is_found_and_never_sent_twice(
        paymongo_channels, merchant, paymongo_emulator, live_server):
    order, payment = paid_on_paymongo(merchant, paymongo_emulator, live_server)
    refund = refund_of(merchant, order, "RF-T", 50_000)
    paymongo_emulator.fail_next("refunds", "timeout")
    assert refund_submit(refund_id=refund.pk) is None  # the answer was lost: nothing known
    [upstream] = paymongo_emulator.refunds_of(payment["id"])  # ... but PayMongo took it
    refund.refresh_from_db()
    assert (refund.status, refund.upstream_reference) == ("PROCESSING", "")
    # the sweep looks it up by our refund_no before anything else: pending, its reference recorded, nothing sent
    assert refunds_sweep(now=later()) == {}
    refund.refresh_from_db()
    assert refund.upstream_reference == upstream["id"]
    # a submission after the lost answer (the task redelivered) finds it too
    Refund.objects.filter(pk=refund.pk).update(upstream_reference="")
    assert refund_submit(refund_id=refund.pk) == upstream["id"]
    assert refund_posts(paymongo_emulator) == 1 and len(paymongo_emulator.refunds) == 1

    paymongo_emulator.settle_refund(upstream["id"], "succeeded")
    assert refunds_sweep(now=later()) == {"refund.unanswered": 1}
    refund.refresh_from_db()
    assert (refund.status, refund.upstream_reference) == ("SUCCESS", upstream["id"])
    assert balances(merchant)["frozen"] == 0 and callbacks_of(refund) == 1
    assert refunds_sweep(now=later()) == {} and callbacks_of(refund) == 1
    assert ledger_verify()["ok"]


def test_a_create_that_never_arrived_is_sent_again_by_the_sweep(paymongo_channels, merchant, paymongo_emulator,
                                                                live_server):
    order, payment = paid_on_paymongo(merchant, paymongo_emulator, live_server)
    refund = refund_of(merchant, order, "RF-5XX", 50_000)
    paymongo_emulator.fail_next("refunds", "5xx")
    assert refund_submit(refund_id=refund.pk) is None
    assert not paymongo_emulator.refunds
    assert refunds_sweep(now=later()) == {"refund.unsubmitted": 1}
    [upstream] = paymongo_emulator.refunds_of(payment["id"])
    refund.refresh_from_db()
    assert refund.upstream_reference == upstream["id"] and refund_posts(paymongo_emulator) == 2


def test_a_refund_whose_webhook_was_lost_is_finished_by_the_sweep(paymongo_channels, merchant, paymongo_emulator,
                                                                  live_server):
    order, _ = paid_on_paymongo(merchant, paymongo_emulator, live_server)
    available = balances(merchant)["available"]
    done, failed = refund_of(merchant, order, "RF-OK", 30_000), refund_of(merchant, order, "RF-KO", 20_000)
    for refund in (done, failed):
        refund_submit(refund_id=refund.pk)
        refund.refresh_from_db()
    paymongo_emulator.settle_refund(done.upstream_reference, "succeeded")
    paymongo_emulator.settle_refund(failed.upstream_reference, "failed")
    # no webhook ever comes: the sweep reads both back from PayMongo
    assert refunds_sweep(now=later()) == {"refund.unanswered": 2}
    done.refresh_from_db(), failed.refresh_from_db()
    assert (done.status, failed.status) == ("SUCCESS", "FAILED")
    assert failed.fail_reason.startswith("paymongo: ")
    assert balances(merchant) == {"available": available - 30_000, "settling": 0, "frozen": 0}
    assert (callbacks_of(done), callbacks_of(failed)) == (1, 1)
    assert ledger_verify()["ok"]


def test_refund_webhooks_are_read_back_and_applied_once(paymongo_channels, merchant, paymongo_emulator, live_server):
    order, _ = paid_on_paymongo(merchant, paymongo_emulator, live_server)
    available = balances(merchant)["available"]
    done, failed = refund_of(merchant, order, "RF-OK", 30_000), refund_of(merchant, order, "RF-KO", 20_000)
    for refund in (done, failed):
        refund_submit(refund_id=refund.pk)
        refund.refresh_from_db()
    # the event's body is not believed: PayMongo's API still says pending
    reply = paymongo_emulator.refund_webhook(done.upstream_reference, url(live_server))
    assert (reply.status_code, reply.json()["refunds"]) == (200, {})
    paymongo_emulator.settle_refund(done.upstream_reference, "succeeded")
    paymongo_emulator.settle_refund(failed.upstream_reference, "failed")
    reply = paymongo_emulator.refund_webhook(done.upstream_reference, url(live_server))
    assert reply.json()["event"] == "payment.refunded"
    assert reply.json()["refunds"] == {done.refund_no: "SUCCESS", failed.refund_no: "FAILED"}
    after = (balances(merchant), Posting.objects.count())
    assert after[0] == {"available": available - 30_000, "settling": 0, "frozen": 0}
    # PayMongo retries, and the other refund's own event comes: nothing moves twice
    for refund_id in (done.upstream_reference, failed.upstream_reference, done.upstream_reference):
        assert paymongo_emulator.refund_webhook(refund_id, url(live_server)).status_code == 200
    assert (balances(merchant), Posting.objects.count()) == after
    assert (callbacks_of(done), callbacks_of(failed)) == (1, 1)


def test_a_refund_webhook_whose_read_back_amount_differs_finishes_nothing_and_is_left_to_an_operator(
        paymongo_channels, merchant, paymongo_emulator, live_server):
    order, _ = paid_on_paymongo(merchant, paymongo_emulator, live_server)
    refund = refund_of(merchant, order, "RF-1", 30_000)
    refund_submit(refund_id=refund.pk)
    refund.refresh_from_db()
    paymongo_emulator.settle_refund(refund.upstream_reference, "succeeded")
    with paymongo_emulator._lock:  # PayMongo's refund carrying our refund_no gave back ₱200.00, not our ₱300.00
        paymongo_emulator.refunds[refund.upstream_reference]["attributes"]["amount"] = 20_000
    before, mismatches = (balances(merchant), Posting.objects.count()), refund_amount_mismatches("paymongo")
    reply = paymongo_emulator.refund_webhook(refund.upstream_reference, url(live_server))
    assert (reply.status_code, reply.json()["refunds"]) == (200, {refund.refund_no: "PROCESSING"})
    assert refund_amount_mismatches("paymongo") == mismatches + 1
    # The sweep's lookup compares too: nothing finishes it; the overview lists it as stuck for an operator.
    assert refunds_sweep(now=later()) == {}
    refund.refresh_from_db()
    assert refund.status == "PROCESSING" and callbacks_of(refund) == 0
    assert (balances(merchant), Posting.objects.count()) == before
    assert balances(merchant)["frozen"] == 30_000
    assert refunds_stuck_a_minute_later() == [refund.refund_no]
    # Once PayMongo holds our amount, the next event finishes the refund once.
    with paymongo_emulator._lock:
        paymongo_emulator.refunds[refund.upstream_reference]["attributes"]["amount"] = 30_000
    reply = paymongo_emulator.refund_webhook(refund.upstream_reference, url(live_server))
    assert reply.json()["refunds"] == {refund.refund_no: "SUCCESS"}
    assert callbacks_of(refund) == 1 and ledger_verify()["ok"]


def test_forged_refund_webhooks_change_nothing(paymongo_channels, merchant, paymongo_emulator, live_server):
    order, _ = paid_on_paymongo(merchant, paymongo_emulator, live_server)
    refund = refund_of(merchant, order, "RF-1", 30_000)
    refund_submit(refund_id=refund.pk)
    refund.refresh_from_db()
    paymongo_emulator.settle_refund(refund.upstream_reference, "succeeded")
    reply = paymongo_emulator.refund_webhook(refund.upstream_reference, url(live_server), secret="whsk_forged")
    assert reply.status_code == 403
    refund.refresh_from_db()
    assert refund.status == "PROCESSING" and callbacks_of(refund) == 0


def test_an_over_refund_paymongo_refuses_fails_the_refund_and_gives_its_amount_back(
        paymongo_channels, merchant, paymongo_emulator, live_server):
    order, payment = paid_on_paymongo(merchant, paymongo_emulator, live_server)
    available = balances(merchant)["available"]
    # Someone refunded most of the payment in PayMongo's dashboard: PayMongo has less left than we think.
    taken = requests.post(f"{paymongo_emulator.url}/v1/refunds", auth=(paymongo_emulator.secret_key, ""), timeout=5,
                          json={"data": {"attributes": {"amount": 140_000, "payment_id": payment["id"],
                                                        "reason": "duplicate"}}})
    assert taken.status_code == 200
    refund = refund_of(merchant, order, "RF-OVER", 20_000)
    assert refund_submit(refund_id=refund.pk) is None
    refund.refresh_from_db()
    assert (refund.status, refund.fail_reason) == ("FAILED",
                                                   "paymongo POST /v1/refunds: HTTP 400 parameter_above_maximum")
    assert balances(merchant) == {"available": available, "settling": 0, "frozen": 0}
    assert len(paymongo_emulator.refunds_of(payment["id"])) == 1 and callbacks_of(refund) == 1


def test_an_over_the_counter_payment_is_refused_at_create_with_2007_naming_the_rule_and_nothing_moves(
        paymongo_channels, merchant, paymongo_emulator, live_server):
    order, _ = paid_on_paymongo(merchant, paymongo_emulator, live_server, method="7eleven")
    before = (balances(merchant), Posting.objects.count())
    with pytest.raises(DomainError) as raised:
        refund_of(merchant, order, "RF-OTC", 10_000)
    assert raised.value.error.code == "2007"
    assert raised.value.msg == (f"order {order.mch_order_no} cannot be refunded: channel {PAYMONGO_PAYIN_CODE} takes "
                                f"no refunds of 7eleven payments.")
    assert (balances(merchant), Posting.objects.count()) == before
    assert not Refund.objects.exists() and refund_posts(paymongo_emulator) == 0


def test_a_refund_past_its_methods_window_is_refused_and_a_channels_own_rule_overrides_paymongos(
        paymongo_channels, merchant, paymongo_emulator, live_server):
    order, _ = paid_on_paymongo(merchant, paymongo_emulator, live_server, method="gcash")
    before = (balances(merchant), Posting.objects.count())
    CollectionOrder.objects.filter(pk=order.pk).update(paid_at=timezone.now() - timedelta(days=181))
    with pytest.raises(DomainError) as raised:
        refund_of(merchant, order, "RF-OLD", 10_000)
    assert raised.value.error.code == "2007"
    assert raised.value.msg.endswith(f"channel {PAYMONGO_PAYIN_CODE} refunds gcash payments only within 180 days of "
                                     f"payment.")
    assert (balances(merchant), Posting.objects.count()) == before and not Refund.objects.exists()
    # within PayMongo's window: taken
    CollectionOrder.objects.filter(pk=order.pk).update(paid_at=timezone.now() - timedelta(days=179))
    assert refund_of(merchant, order, "RF-179", 10_000).status == "PROCESSING"
    # the channel's own rows win over PayMongo's defaults
    RefundRule.objects.create(channel=paymongo_channels["payin"], method="gcash", window_days=7)
    with pytest.raises(DomainError) as raised:
        refund_of(merchant, order, "RF-RULE", 10_000)
    assert raised.value.msg.endswith("refunds gcash payments only within 7 days of payment.")


def test_the_lookup_answers_unknown_unless_every_page_was_read(paymongo_channels, merchant, paymongo_emulator,
                                                               live_server):
    order, payment = paid_on_paymongo(merchant, paymongo_emulator, live_server)
    first, second = refund_of(merchant, order, "RF-A", 10_000), refund_of(merchant, order, "RF-B", 10_000)
    refund_submit(refund_id=first.pk)
    paymongo_emulator.fail_next("refunds", "timeout")
    refund_submit(refund_id=second.pk)
    paymongo_emulator.page_limit = 1  # one refund a page: ours is on the second (newest first)
    second.refresh_from_db()
    assert PayMongoPayinAdapter().refund_state(refund=second).outcome == "pending"
    paymongo_emulator.fail_next_page("5xx")
    with pytest.raises(LookupUnknown):
        PayMongoPayinAdapter().refund_state(refund=first)
    # the sweep that cannot read the list whole sends nothing again and fails nothing
    paymongo_emulator.fail_next_page("5xx", "5xx")
    assert refunds_sweep(now=later()) == {}
    assert refund_posts(paymongo_emulator) == 2 and len(paymongo_emulator.refunds_of(payment["id"])) == 2
    assert set(Refund.objects.values_list("status", flat=True)) == {"PROCESSING"}


def test_a_refund_goes_to_the_paymongo_account_that_took_the_payment_whatever_the_routing_says_now(
        paymongo_channels, merchant, paymongo_emulator, live_server):
    from tests.channels.conftest import paymongo_channel_create
    from tests.channels.paymongo_emulator import PayMongoEmulator

    order, payment = paid_on_paymongo(merchant, paymongo_emulator, live_server)
    # Routing moved on: the channel that took the payment is drained and another PayMongo account now serves pay-ins.
    newer = PayMongoEmulator(secret_key="sk_test_newer", stall_seconds=0.5).start()
    try:
        paymongo_channel_create(code="PAYMONGO_PHP_PAYIN_2", direction="payin", emulator=newer, priority=1)
        paymongo_channels["payin"].is_draining = True
        paymongo_channels["payin"].save(update_fields=["is_draining"])
        refund = refund_of(merchant, order, "RF-1", 30_000)
        reference = refund_submit(refund_id=refund.pk)
        assert paymongo_emulator.refunds[reference]["attributes"]["payment_id"] == payment["id"]
        assert not newer.requests
    finally:
        newer.stop()


def test_one_refund_submitted_by_workers_and_the_sweep_at_once_is_one_refund_at_paymongo(
        paymongo_channels, merchant, paymongo_emulator, live_server):
    order, payment = paid_on_paymongo(merchant, paymongo_emulator, live_server)
    refund = refund_of(merchant, order, "RF-RACE", 30_000)
    paymongo_emulator.latency(0.3)  # every call slow: the submissions overlap
    outcomes = at_once(lambda i: refunds_sweep(now=later()) if i % 2 else refund_submit(refund_id=refund.pk), 6)
    assert all(exc is None for _, exc in outcomes), outcomes
    paymongo_emulator.latency(0)
    [upstream] = paymongo_emulator.refunds_of(payment["id"])
    assert refund_posts(paymongo_emulator) == 1
    refund.refresh_from_db()
    assert refund.upstream_reference == upstream["id"]


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "refundable", "window_days"), [
    ("card", True, 60), ("gcash", True, 180), ("grab_pay", True, 90), ("paymaya", True, 365), ("billease", True, 60),
    ("dob", True, 30), ("brankas_bdo", True, 30), ("qrph", False, None), ("dob_ubp", False, None),
    ("7eleven", False, None), ("shopee_pay", True, 30), ("", True, 30),
])
def test_paymongos_own_rules_hold_by_payment_method(bootstrapped, live, method, refundable, window_days):
    from apps.channels.models import Channel
    from apps.channels.refund_rules import refund_rule_for

    channel = Channel.objects.create(code="PM_RULES", name="PayMongo", adapter="paymongo",
                                     direction=Channel.Direction.PAYIN, currency_id="PHP")
    rule = refund_rule_for(channel=channel, adapter=PayMongoPayinAdapter, payment_method=method)
    assert (rule.refundable, rule.partial, rule.window_days) == (refundable, True, window_days)
