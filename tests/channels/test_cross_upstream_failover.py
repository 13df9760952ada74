"""Xendit and PayMongo together (docs/channels.md, "Xendit and PayMongo together"): a Xendit channel at priority 1
and a PayMongo channel at priority 2 for PHP pay-ins and payouts, both emulators running over real HTTP, Xendit
behind a gate (tests/channels/upstream_gate.py) that refuses connections or answers 503. The promise: with
Xendit failing, pay-ins open on PayMongo and payouts Xendit refused go out through PayMongo, each once; an ambiguous
Xendit answer keeps its payout on Xendit; when Xendit recovers, traffic returns to it. The tasks are driven directly
(payout_submit, the pay page, reconciliation), as tests/channels/test_failover.py does; the ledger is verified after
every test (tests/conftest.py)."""

import json
import logging
import time

import pytest
from django.test import Client
from django.utils import timezone

from apps.channels.base import UpstreamDeclined, UpstreamUnavailable
from apps.channels.models import Channel, ChannelHealth, UpstreamPayin
from apps.channels.paymongo import PayMongoPayoutAdapter, paymongo_webhook_handle
from apps.channels.services import channel_credentials_set, channels_reconcile
from apps.channels.xendit import xendit_webhook_handle
from apps.collection.failover import collection_payment_start
from apps.collection.models import CollectionOrder
from apps.payout.models import Payout
from tests.channels.conftest import paymongo_channel_create
from tests.channels.paymongo_emulator import PayMongoEmulator, signature_header
from tests.channels.test_failover import backdate, payout_new, submit
from tests.channels.upstream_gate import UpstreamGate
from tests.channels.xendit_emulator import XenditEmulator
from tests.collection.conftest import create_ok as pay_create_ok
from tests.payout.conftest import PHP_FEE, balances, fund

pytestmark = pytest.mark.django_db

FUNDS = 10_000_000


class Both:
    """Xendit (priority 1, behind its gate) and PayMongo (priority 2) as PHP pay-in and payout channels."""

    def __init__(self):
        self.xendit = XenditEmulator(stall_seconds=2.5).start()
        self.gate = UpstreamGate(self.xendit.url, slow_seconds=1.5)
        self.paymongo = PayMongoEmulator(stall_seconds=2.5).start()
        self.x, self.p = {}, {}
        for direction in Channel.Direction:
            channel = Channel.objects.create(code=f"XENDIT_PHP_{direction.value.upper()}", name="Xendit",
                                             adapter="xendit", direction=direction, currency_id="PHP", priority=1,
                                             api_base_url=self.gate.url)
            self.x[direction.value] = channel_credentials_set(channel=channel, secret_key=self.xendit.secret_key,
                                                              callback_token=self.xendit.callback_token)
            self.p[direction.value] = paymongo_channel_create(code=f"PAYMONGO_PHP_{direction.value.upper()}",
                                                              direction=direction, emulator=self.paymongo, priority=2)

    def disbursements(self, platform_order_no: str) -> list[str]:
        """Every disbursement of the order at both upstreams, as 'upstream:id'."""
        return ([f"xendit:{d['id']}" for d in self.xendit.payouts_by_reference(platform_order_no)]
                + [f"paymongo:{t['id']}" for t in self.paymongo.transfers_by_reference(platform_order_no)])

    def paymongo_session_paid(self, session_id: str) -> dict:
        """The payer pays the checkout session; PayMongo's signed webhook is handled as the endpoint would."""
        self.paymongo.pay_session(session_id)
        with self.paymongo._lock:
            resource = json.loads(json.dumps(self.paymongo.sessions[session_id]))
        body = self.paymongo.event("checkout_session.payment.paid", resource)
        header = signature_header(body=body, secret=self.paymongo.webhook_secret, timestamp=int(time.time()),
                                  livemode=False)
        return paymongo_webhook_handle(channel=self.p["payin"], signature=header, body=body)

    def stop(self):
        self.gate.stop()
        self.xendit.stop()
        self.paymongo.stop()


@pytest.fixture
def both(bootstrapped, live, quick_breaker):
    up = Both()
    yield up
    up.stop()


@pytest.fixture
def shop(merchant):
    fund(merchant, FUNDS)
    return merchant


def payin_new(shop, amount: int) -> CollectionOrder:
    return pay_create_ok(Client(), shop, product_code="PHP_COLLECT_D0", amount=amount)


def cooled_down(channel: Channel, settings) -> None:
    ChannelHealth.objects.filter(channel=channel).update(
        opened_at=timezone.now() - timezone.timedelta(seconds=settings.CHANNEL_BREAKER_COOLDOWN_SECONDS + 1))


def test_with_xendit_failing_payins_open_on_paymongo_declined_payouts_go_out_there_once_and_traffic_returns(
        both, shop, settings):
    # An ambiguous answer first: Xendit's 503 may have taken the payout, so it must stay on Xendit.
    both.gate.set("5xx")
    ambiguous = submit(payout_new(shop, amount=11_111, bank_code="BDO"))
    assert (ambiguous.channel, ambiguous.upstream_reference, ambiguous.status) == (
        both.x["payout"], "", Payout.Status.PROCESSING)

    # Xendit refuses connections: pay-ins open on PayMongo, declined payouts go out through PayMongo.
    both.gate.set("down")
    payins = []
    for i in range(3):
        order = payin_new(shop, 100_000 + i)
        assert order.channel == both.x["payin"] and order.route_reason == "priority 1"
        page = Client().get(f"/pay/{order.pay_token}")
        order.refresh_from_db()
        [session] = both.paymongo.sessions_by_reference(order.platform_order_no)
        assert page.status_code == 302 and page["Location"] == session["attributes"]["checkout_url"]
        assert order.channel == both.p["payin"]
        assert order.route_reason.startswith("failover: XENDIT_PHP_PAYIN unavailable: xendit GET /v2/invoices")
        payins.append((order, session["id"]))
    assert both.xendit.invoices == {}
    declined = [submit(payout_new(shop, amount=20_000 + i, bank_code="GCASH")) for i in range(3)]
    for payout in declined:
        assert payout.channel == both.p["payout"] and payout.upstream_reference, payout.route_reason
        # declined at the door, or (once its circuit opened) routed past it at create
        assert payout.route_reason in ("failover: XENDIT_PHP_PAYOUT declined: xendit POST /v2/payouts: "
                                       "ConnectionError; priority 2",
                                       "failover: XENDIT_PHP_PAYOUT circuit open; priority 2"), payout.route_reason
        assert both.disbursements(payout.platform_order_no) == [f"paymongo:{payout.upstream_reference}"]
    # Both Xendit circuits are open: new orders are routed to PayMongo at create.
    assert ChannelHealth.objects.get(channel=both.x["payout"]).state == ChannelHealth.State.OPEN
    assert ChannelHealth.objects.get(channel=both.x["payin"]).state == ChannelHealth.State.OPEN
    routed = submit(payout_new(shop, amount=30_000, bank_code="BPI"))
    assert (routed.channel, routed.route_reason) == (both.p["payout"], "failover: XENDIT_PHP_PAYOUT circuit open; "
                                                                       "priority 2")
    declined.append(routed)
    routed_payin = payin_new(shop, 130_000)
    assert routed_payin.channel == both.p["payin"]
    collection_payment_start(order=routed_payin)
    payins.append((routed_payin, both.paymongo.sessions_by_reference(routed_payin.platform_order_no)[0]["id"]))

    # The ambiguous payout, sent again by the sweeper while Xendit refuses: that refusal proves nothing about the
    # 503, so it stays on Xendit with its funds frozen and nothing goes to PayMongo.
    backdate(ambiguous, seconds=120)
    ambiguous = submit(ambiguous)
    assert (ambiguous.channel, ambiguous.upstream_reference, ambiguous.status) == (
        both.x["payout"], "", Payout.Status.PROCESSING)
    assert both.disbursements(ambiguous.platform_order_no) == []

    # The payers pay on PayMongo, PayMongo pays the transfers: credited and settled once each.
    for order, session_id in payins:
        assert both.paymongo_session_paid(session_id)["changed"] == "paid"
        assert both.paymongo_session_paid(session_id)["changed"] is None  # a replayed webhook changes nothing
    for payout in declined:
        both.paymongo.settle_transfer(payout.upstream_reference, "succeeded")
    settings.CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS = 0
    assert sorted(channels_reconcile()["payouts"]["succeeded"]) == sorted(p.platform_order_no for p in declined)

    # Xendit recovers; after the cool-down the probes go to it, their success closes both circuits, and new orders
    # are routed to Xendit again.
    both.gate.set("up")
    cooled_down(both.x["payout"], settings)
    cooled_down(both.x["payin"], settings)
    probes = [submit(payout_new(shop, amount=40_000 + i, bank_code="BDO")) for i in range(2)]
    assert [p.channel for p in probes] == [both.x["payout"]] * 2
    assert all(p.upstream_reference in both.xendit.payouts for p in probes)
    payin_probes = [payin_new(shop, 140_000 + i) for i in range(2)]
    for order in payin_probes:
        assert order.channel == both.x["payin"]
        collection_payment_start(order=order)
    assert ChannelHealth.objects.get(channel=both.x["payout"]).state == ChannelHealth.State.CLOSED
    assert ChannelHealth.objects.get(channel=both.x["payin"]).state == ChannelHealth.State.CLOSED
    back = submit(payout_new(shop, amount=50_000, bank_code="BDO"))
    assert (back.channel, back.route_reason) == (both.x["payout"], "priority 1")
    assert back.upstream_reference in both.xendit.payouts
    back_payin = payin_new(shop, 150_000)
    assert (back_payin.channel, back_payin.route_reason) == (both.x["payin"], "priority 1")
    _, start = collection_payment_start(order=back_payin)
    assert start.upstream_reference in both.xendit.invoices

    # The ambiguous payout is sent again on Xendit with its key: one disbursement there, none at PayMongo.
    ambiguous = submit(ambiguous)
    assert ambiguous.channel == both.x["payout"]
    assert both.disbursements(ambiguous.platform_order_no) == [f"xendit:{ambiguous.upstream_reference}"]

    # Every payout exactly once across both upstreams, on the channel it records; the money adds up.
    payouts = list(Payout.objects.select_related("channel").filter(merchant=shop.merchant))
    assert len(payouts) == 1 + 4 + 2 + 1
    for payout in payouts:
        [where] = both.disbursements(payout.platform_order_no)
        assert where == f"{payout.channel.adapter}:{payout.upstream_reference}"
    credited = CollectionOrder.objects.filter(merchant=shop.merchant, status=CollectionOrder.Status.SUCCESS)
    assert sorted(o.pk for o in credited) == sorted(o.pk for o, _ in payins)
    paid_out = sum(p.amount + PHP_FEE for p in declined)
    frozen = sum(p.amount + PHP_FEE for p in payouts if p.status == Payout.Status.PROCESSING)
    assert balances(shop) == {"available": FUNDS + sum(o.net_amount for o in credited) - paid_out - frozen,
                              "settling": 0, "frozen": frozen}


def test_a_paid_invoice_at_the_channel_a_payin_left_is_credited_once_and_a_second_payment_logged_for_refund(
        both, shop, caplog):
    """Xendit opened an invoice whose answer was lost (the order then moved to PayMongo). If that invoice is paid
    anyway, the money arrived at Xendit: the order is credited, never ignored; a payment of the PayMongo session too
    is logged for a refund, not credited again."""
    order = payin_new(shop, 120_000)
    both.xendit.fail_next("invoices", "timeout")  # Xendit creates the invoice; its answer is lost
    order, start = collection_payment_start(order=order)
    assert order.channel == both.p["payin"] and start.upstream_reference in both.paymongo.sessions
    [lost] = both.xendit.invoice_by_external_id(order.platform_order_no)
    both.xendit.pay_invoice(lost["id"])
    result = xendit_webhook_handle(channel=both.x["payin"], token=both.xendit.callback_token,
                                   body=json.dumps({"id": lost["id"]}).encode())
    assert result["changed"] == "paid"
    order.refresh_from_db()
    assert (order.status, order.upstream_reference) == (CollectionOrder.Status.SUCCESS, lost["id"])
    with caplog.at_level(logging.ERROR, logger="apps.collection.upstream"):
        assert both.paymongo_session_paid(start.upstream_reference)["changed"] is None
    assert f"{start.upstream_reference} (120000 PHP) not credited; refund it upstream" in caplog.text
    assert balances(shop)["available"] == FUNDS + order.net_amount


def test_a_payin_opened_on_xendit_while_moved_to_paymongo_is_reconciled_with_xendit(both, shop, settings):
    """The race of collection_payment_start: the invoice is recorded on Xendit while a failover moves the order to
    PayMongo. The order now names PayMongo, its payment is Xendit's: reconciliation asks Xendit."""
    order = payin_new(shop, 110_000)
    order, start = collection_payment_start(order=order)
    assert UpstreamPayin.objects.get(platform_order_no=order.platform_order_no).channel == both.x["payin"]
    CollectionOrder.objects.filter(pk=order.pk).update(channel=both.p["payin"])  # the mover won the row lock
    both.xendit.pay_invoice(start.upstream_reference)  # the webhook is lost
    CollectionOrder.objects.filter(pk=order.pk).update(expire_at=timezone.now() - timezone.timedelta(seconds=5))
    result = channels_reconcile()
    assert result["payins"]["paid"] == [order.platform_order_no], result
    order.refresh_from_db()
    assert (order.status, order.upstream_reference) == (CollectionOrder.Status.SUCCESS, start.upstream_reference)


def test_paymongo_classifies_its_failures_for_the_failover(both, shop):
    """PayMongo speaks the failover's language: a refused connection or a 401/403/429 is declined (not taken), a 503
    or a read timeout is ambiguous; the lookup by reference_number says whether it holds a transfer of ours."""
    gate = UpstreamGate(both.paymongo.url, slow_seconds=1.5)
    try:
        Channel.objects.filter(pk=both.p["payout"].pk).update(api_base_url=gate.url)
        payout = payout_new(shop, amount=21_000, bank_code="GCASH")  # routed to Xendit: put on PayMongo, unsent
        Payout.objects.filter(pk=payout.pk).update(channel=both.p["payout"])
        payout = Payout.objects.select_related("channel", "currency").get(pk=payout.pk)
        adapter = PayMongoPayoutAdapter()
        assert adapter.disbursement_lookup(payout=payout).outcome == "missing"
        gate.set("down")
        with pytest.raises(UpstreamDeclined):
            adapter.start_disbursement(payout=payout)
        with pytest.raises(UpstreamDeclined):
            adapter.disbursement_lookup(payout=payout)
        gate.set("5xx")
        with pytest.raises(UpstreamUnavailable) as ambiguous:
            adapter.start_disbursement(payout=payout)
        assert not isinstance(ambiguous.value, UpstreamDeclined)
        gate.set("up")
        both.paymongo.fail_next("batch_transfers", "429")
        with pytest.raises(UpstreamDeclined):
            adapter.start_disbursement(payout=payout)
        both.paymongo.fail_next("batch_transfers", "timeout")
        with pytest.raises(UpstreamUnavailable) as lost:
            adapter.start_disbursement(payout=payout)
        assert not isinstance(lost.value, UpstreamDeclined)
        found = adapter.disbursement_lookup(payout=payout)
        [transfer] = both.paymongo.transfers_by_reference(payout.platform_order_no)
        assert (found.outcome, found.reference) == ("pending", transfer["id"])
    finally:
        gate.stop()


def test_a_reference_from_xendit_is_bound_with_xendits_channel_when_the_payout_moved_meanwhile(both, shop, monkeypatch,
                                                                                           caplog, settings):
    """The payout's race: Xendit takes the payout while another worker moved it to PayMongo. Xendit's reference is
    bound with Xendit's channel, never to a payout that names PayMongo (reconciliation would ask PayMongo for it);
    an operator is told; reconciliation asks Xendit and settles it."""
    from apps.channels.xendit import XenditPayoutAdapter

    real = XenditPayoutAdapter.start_disbursement

    def taken_while_moved(self, *, payout):
        reference = real(self, payout=payout)
        Payout.objects.filter(pk=payout.pk).update(channel=both.p["payout"])  # the other worker's move
        return reference

    monkeypatch.setattr(XenditPayoutAdapter, "start_disbursement", taken_while_moved)
    with caplog.at_level(logging.ERROR, logger="apps.payout.failover"):
        payout = submit(payout_new(shop, amount=23_456, bank_code="BDO"))
    [taken] = both.xendit.payouts_by_reference(payout.platform_order_no)
    assert (payout.channel, payout.upstream_reference, payout.status) == (both.x["payout"], taken["id"],
                                                                          Payout.Status.PROCESSING)
    assert f"XENDIT_PHP_PAYOUT took it as {taken['id']} after it had moved" in caplog.text
    assert both.paymongo.transfers_by_reference(payout.platform_order_no) == []
    both.xendit.settle_payout(taken["id"], "SUCCEEDED")
    settings.CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS = 0
    assert channels_reconcile()["payouts"]["succeeded"] == [payout.platform_order_no]
    assert balances(shop) == {"available": FUNDS - 23_456 - PHP_FEE, "settling": 0, "frozen": 0}
