"""Failover that never pays twice (docs/channels.md, "Failover"), with two Xendit emulators as two PHP channels, each
behind a gate that drives it through outages (connections refused, 503s), slowness (answers lost after the upstream
acted) and recovery. Checked every time: each order is one disbursement across both upstreams, none is lost (each
is paid, failed, or PROCESSING with its funds frozen), and the ledger holds (tests/conftest.py checks it after
every test)."""

import json

import pytest
from django.test import Client
from django.utils import timezone

from apps.channels.models import Channel, ChannelHealth
from apps.channels.services import channel_credentials_set, channels_reconcile
from apps.channels.xendit import xendit_webhook_handle
from apps.collection.models import CollectionOrder
from apps.payout.models import Payout
from apps.payout.services import payout_submit
from apps.payout.sweep import payouts_sweep
from tests.channels.upstream_gate import UpstreamGate
from tests.channels.xendit_emulator import XenditEmulator
from tests.collection.conftest import create_ok as pay_create_ok
from tests.payout.conftest import PHP_FEE, balances, fund, new_payout

pytestmark = pytest.mark.django_db

FUNDS = 10_000_000


class Upstream:
    """One Xendit emulator behind its gate, configured as a PHP pay-in and payout channel."""

    def __init__(self, name: str, priority: int):
        self.emulator = XenditEmulator(stall_seconds=2.5).start()
        self.gate = UpstreamGate(self.emulator.url, slow_seconds=1.5)
        self.channels = {}
        for direction in Channel.Direction:
            channel = Channel.objects.create(code=f"XENDIT_{name}_PHP_{direction.value.upper()}", name=name,
                                             adapter="xendit", direction=direction, currency_id="PHP",
                                             priority=priority, api_base_url=self.gate.url)
            self.channels[direction.value] = channel_credentials_set(
                channel=channel, secret_key=self.emulator.secret_key, callback_token=self.emulator.callback_token)

    @property
    def payout(self) -> Channel:
        return self.channels["payout"]

    def disbursements(self, platform_order_no: str) -> list[dict]:
        return self.emulator.payouts_by_reference(platform_order_no)

    def stop(self):
        self.gate.stop()
        self.emulator.stop()


@pytest.fixture
def upstreams(bootstrapped, live, quick_breaker):
    a, b = Upstream("A", 1), Upstream("B", 2)
    yield a, b
    a.stop()
    b.stop()


@pytest.fixture
def shop(merchant):
    fund(merchant, FUNDS)
    return merchant


_accounts = iter(range(10_000_000, 99_999_999))


def payout_new(ctx, **overrides) -> Payout:
    """A payout to a payee account of its own (no velocity review)."""
    return new_payout(ctx, payee_account=f"09{next(_accounts)}", **overrides)


def submit(payout: Payout) -> Payout:
    try:
        payout_submit(payout_id=payout.pk)
    except Exception:  # noqa: BLE001 - an ambiguous or unsendable submission stays PROCESSING (the sweeper's)
        pass
    return Payout.objects.select_related("channel").get(pk=payout.pk)


def backdate(payout: Payout, **seconds) -> None:
    Payout.objects.filter(pk=payout.pk).update(submitted_at=timezone.now() - timezone.timedelta(**seconds))


def once_across(upstreams, payout: Payout) -> list[tuple[str, dict]]:
    """Every disbursement of the order at every upstream: a correct platform leaves at most one."""
    return [(up.payout.code, d) for up in upstreams for d in up.disbursements(payout.platform_order_no)]


def open_circuit(channel: Channel, *, seconds_ago: int = 0) -> None:
    ChannelHealth.objects.update_or_create(channel=channel, defaults={
        "state": ChannelHealth.State.OPEN, "opened_at": timezone.now() - timezone.timedelta(seconds=seconds_ago),
        "reason": "test"})


def test_refused_connections_move_payouts_to_the_next_channel_open_its_circuit_and_it_closes_on_recovery(
        upstreams, shop, settings):
    a, b = upstreams
    a.gate.set("down")
    moved = [submit(payout_new(shop, amount=10_000 + i, bank_code="GCASH")) for i in range(3)]
    for payout in moved:
        assert payout.channel == b.payout and payout.status == Payout.Status.PROCESSING and payout.upstream_reference
        assert payout.route_reason.startswith("failover: XENDIT_A_PHP_PAYOUT declined: xendit POST /v2/payouts: "
                                              "ConnectionError; priority 2"), payout.route_reason
        assert once_across(upstreams, payout) == [("XENDIT_B_PHP_PAYOUT", b.disbursements(payout.platform_order_no)[0])]
    # three declines in the window: A's circuit is open, so new payouts are routed to B at create
    health = ChannelHealth.objects.get(channel=a.payout)
    assert health.state == ChannelHealth.State.OPEN and "3 failures in 60 s" in health.reason
    routed = payout_new(shop, amount=20_000)
    assert (routed.channel, routed.route_reason) == (b.payout, "failover: XENDIT_A_PHP_PAYOUT circuit open; priority 2")
    assert submit(routed).upstream_reference in b.emulator.payouts

    # recovery: A answers again; after the cool-down two probes go to A, their success closes the circuit
    a.gate.set("up")
    ChannelHealth.objects.filter(channel=a.payout).update(
        opened_at=timezone.now() - timezone.timedelta(seconds=settings.CHANNEL_BREAKER_COOLDOWN_SECONDS + 1))
    probes = [submit(payout_new(shop, amount=30_000 + i)) for i in range(2)]
    assert [p.channel for p in probes] == [a.payout, a.payout]
    assert all("probe of XENDIT_A_PHP_PAYOUT (half-open)" in p.route_reason for p in probes)
    assert ChannelHealth.objects.get(channel=a.payout).state == ChannelHealth.State.CLOSED
    back = payout_new(shop, amount=40_000)
    assert (back.channel, back.route_reason) == (a.payout, "priority 1")

    # every order settles where it was taken, once
    for payout in Payout.objects.filter(merchant=shop.merchant):
        payout = submit(payout) if not payout.upstream_reference else payout
        [(code, disbursement)] = once_across(upstreams, payout)
        assert code == payout.channel.code and disbursement["id"] == payout.upstream_reference
    assert balances(shop)["frozen"] == sum(p.amount + PHP_FEE for p in Payout.objects.filter(merchant=shop.merchant))


def test_a_lost_answer_keeps_the_payout_on_its_channel_until_the_disbursement_binds_never_a_second_one(
        upstreams, shop, settings):
    a, b = upstreams
    a.gate.set("slow")  # A creates the disbursement; its answer is lost
    payout = submit(payout_new(shop, amount=12_345))
    assert (payout.channel, payout.upstream_reference, payout.status) == (a.payout, "", Payout.Status.PROCESSING)
    assert len(a.disbursements(payout.platform_order_no)) == 1
    # A goes down and its circuit opens: the re-submission is refused at the door, and that proves nothing about
    # the first attempt: the payout stays on A with its funds frozen
    a.gate.set("down")
    backdate(payout, seconds=120)
    payout = submit(payout)
    assert (payout.channel, payout.upstream_reference, payout.channel_declined_at) == (a.payout, "", None)
    open_circuit(a.payout)
    backdate(payout, seconds=settings.CHANNEL_FAILOVER_LOOKUP_AFTER_SECONDS + 1)
    payouts_sweep()  # the sweeper's re-submission: A cannot be asked, the payout waits
    payout = submit(payout)
    assert (payout.channel, payout.upstream_reference) == (a.payout, "")
    assert balances(shop)["frozen"] == 12_345 + PHP_FEE and b.emulator.payouts == {}
    # A answers again (its circuit still open): asked by our key, it holds the disbursement, so the payout stays
    a.gate.set("up")
    payout = submit(payout)
    assert (payout.channel, payout.upstream_reference) == (a.payout, "")
    ChannelHealth.objects.filter(channel=a.payout).update(state=ChannelHealth.State.CLOSED, opened_at=None)
    payout = submit(payout)  # the same key again: A's answer (409) binds its one disbursement
    [(code, disbursement)] = once_across(upstreams, payout)
    assert (code, disbursement["id"]) == ("XENDIT_A_PHP_PAYOUT", payout.upstream_reference)


def test_a_503_then_a_lookup_that_finds_nothing_moves_the_payout_and_it_is_paid_once(upstreams, shop, settings):
    a, b = upstreams
    a.gate.set("5xx")  # answered 503: ambiguous to us, though nothing was created
    payout = submit(payout_new(shop, amount=22_222))
    assert (payout.channel, payout.upstream_reference) == (a.payout, "")
    open_circuit(a.payout)
    a.gate.set("up")
    backdate(payout, seconds=60)  # too early to ask: it waits
    payout = submit(payout)
    assert payout.channel == a.payout
    backdate(payout, seconds=settings.CHANNEL_FAILOVER_LOOKUP_AFTER_SECONDS + 1)
    payout = submit(payout)
    assert payout.channel == b.payout and payout.upstream_reference in b.emulator.payouts
    assert payout.route_reason.startswith("failover: XENDIT_A_PHP_PAYOUT circuit open; priority 2")
    assert once_across(upstreams, payout) == [("XENDIT_B_PHP_PAYOUT", b.emulator.payouts[payout.upstream_reference])]
    # B pays it; the success arrives through B's reconciliation like any other
    b.emulator.settle_payout(payout.upstream_reference, "SUCCEEDED")
    settings.CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS = 0
    assert channels_reconcile()["payouts"]["succeeded"] == [payout.platform_order_no]
    assert balances(shop) == {"available": FUNDS - 22_222 - PHP_FEE, "settling": 0, "frozen": 0}


def test_a_refusal_of_the_payees_account_fails_the_payout_there_and_is_no_failure_of_the_channel(upstreams, shop):
    a, b = upstreams
    a.emulator.fail_next("payouts", "400", "400", "400", "400")
    for i in range(4):
        payout = submit(payout_new(shop, amount=5_000 + i))
        assert (payout.status, payout.channel, payout.fail_reason) == (
            Payout.Status.FAILED, a.payout, "refused upstream: INVALID_DESTINATION")
    assert not ChannelHealth.objects.filter(channel=a.payout, state=ChannelHealth.State.OPEN).exists()
    assert b.emulator.payouts == {} and balances(shop)["frozen"] == 0


def test_a_payout_approved_while_its_channel_is_open_goes_to_the_next_one_before_anything_is_sent(upstreams, shop):
    a, b = upstreams
    payout = payout_new(shop, amount=33_000)
    assert payout.channel == a.payout
    open_circuit(a.payout)
    payout = submit(payout)
    assert payout.channel == b.payout and payout.upstream_reference in b.emulator.payouts
    assert a.gate.forwarded == []


def test_a_payin_whose_channel_refuses_connections_opens_on_the_next_one_and_is_paid_there(upstreams, merchant):
    a, b = upstreams
    a.gate.set("down")
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=150_000)
    assert order.channel == a.channels["payin"]
    page = Client().get(f"/pay/{order.pay_token}")
    order.refresh_from_db()
    assert order.channel == b.channels["payin"]
    assert order.route_reason.startswith("failover: XENDIT_A_PHP_PAYIN unavailable: xendit GET /v2/invoices")
    [invoice] = b.emulator.invoice_by_external_id(order.platform_order_no)
    assert page.status_code == 302 and page["Location"] == invoice["invoice_url"]
    assert a.emulator.invoices == {}
    # the payer pays on B; B's webhook credits the order once
    b.emulator.pay_invoice(invoice["id"])
    result = xendit_webhook_handle(channel=b.channels["payin"], token=b.emulator.callback_token,
                                   body=json.dumps({"id": invoice["id"]}).encode())
    assert result["changed"] == "paid"
    order.refresh_from_db()
    assert order.status == CollectionOrder.Status.SUCCESS and order.upstream_reference == invoice["id"]


def test_outages_slowness_and_recovery_at_both_upstreams_pay_every_payout_exactly_once(upstreams, shop, settings):
    """Rounds of scripted weather at both upstreams (refused connections, 503s, answers lost after the upstream
    acted, recovery), new payouts each round, the sweeper's re-submissions long enough after each submission that
    lookups are allowed; then both recover. Every payout ends with exactly one disbursement, on the channel it
    records, and is paid once; the merchant's money adds up and the ledger holds."""
    a, b = upstreams
    settings.CHANNEL_BREAKER_COOLDOWN_SECONDS = 0  # open circuits half-open at once: probes every round
    weather = [("up", "up"), ("down", "up"), ("slow", "up"), ("5xx", "slow"), ("down", "5xx"), ("up", "down"),
               ("slow", "slow"), ("up", "up")]
    for round_, (at_a, at_b) in enumerate(weather):
        a.gate.set(at_a)
        b.gate.set(at_b)
        for i in range(3):
            submit(payout_new(shop, amount=10_000 + 100 * round_ + i))
        for payout in Payout.objects.filter(status=Payout.Status.PROCESSING, upstream_reference=""):
            backdate(payout, seconds=settings.CHANNEL_FAILOVER_LOOKUP_AFTER_SECONDS + 1)
            submit(payout)
    a.gate.set("up")
    b.gate.set("up")
    for _ in range(4):  # recovery: the sweeper's re-submissions bind or send what is left
        for payout in Payout.objects.filter(status=Payout.Status.PROCESSING, upstream_reference=""):
            backdate(payout, seconds=settings.CHANNEL_FAILOVER_LOOKUP_AFTER_SECONDS + 1)
            submit(payout)

    payouts = list(Payout.objects.select_related("channel").filter(merchant=shop.merchant))
    assert len(payouts) == 3 * len(weather)
    moved = 0
    for payout in payouts:
        assert payout.status == Payout.Status.PROCESSING and payout.upstream_reference, payout.route_reason
        [(code, disbursement)] = once_across(upstreams, payout)  # one disbursement across both upstreams
        assert (code, disbursement["id"]) == (payout.channel.code, payout.upstream_reference)
        moved += payout.route_reason.startswith("failover")
        up = a if payout.channel == a.payout else b
        up.emulator.settle_payout(payout.upstream_reference, "SUCCEEDED")
    assert moved  # the weather did move some
    settings.CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS = 0
    assert len(channels_reconcile()["payouts"]["succeeded"]) == len(payouts)
    assert balances(shop) == {"available": FUNDS - sum(p.amount + PHP_FEE for p in payouts), "settling": 0,
                              "frozen": 0}


def test_a_second_sender_arriving_while_a_payout_is_in_flight_sends_nothing_anywhere(upstreams, shop, monkeypatch):
    """Two senders of one payout at once (the submission task and the sweeper's re-submission) could each reach a
    different upstream: one clearing the 'declined' mark while its request is in flight, the other moving the payout
    on the strength of its own refusal. One sender at a time: the second arrives while the first is inside the
    upstream call, sends nothing, and the payout is one disbursement."""
    from apps.channels.base import UpstreamUnavailable
    from apps.channels.xendit import XenditPayoutAdapter
    from apps.payout.failover import payout_send

    a, b = upstreams
    payout = payout_new(shop, amount=12_000)
    calls, second = [], []
    original = XenditPayoutAdapter.start_disbursement

    def in_flight(self, *, payout):
        calls.append(payout.channel.code)
        if len(calls) == 1:  # the second sender arrives now, with the first's request under way
            try:
                payout_send(payout=Payout.objects.select_related("channel").get(pk=payout.pk), first=False)
            except UpstreamUnavailable as exc:
                second.append(str(exc))
        return original(self, payout=payout)

    monkeypatch.setattr(XenditPayoutAdapter, "start_disbursement", in_flight)
    payout = submit(payout)
    assert second and "still under way" in second[0]
    assert calls == ["XENDIT_A_PHP_PAYOUT"]  # the second sender called no upstream
    [(code, disbursement)] = once_across(upstreams, payout)
    assert code == payout.channel.code == "XENDIT_A_PHP_PAYOUT" and disbursement["id"] == payout.upstream_reference


def test_a_sender_killed_mid_send_frees_the_payout_within_one_rounds_lease(upstreams, shop, settings):
    """A worker killed while sending leaves its lease behind; the next sender (the sweeper's) may send once the lease
    of one round of calls has run out, not after the whole failover's worth (the soak left a payout PROCESSING for
    eight minutes so)."""
    import time

    from apps.channels.registry import payout_adapter
    from apps.channels.submission import one_submission_at_a_time

    payout = payout_new(shop, amount=13_000)
    calls = payout_adapter(payout.channel).send_calls
    timeout = settings.CHANNEL_HTTP_TIMEOUT_SECONDS
    settings.CHANNEL_HTTP_TIMEOUT_SECONDS = 0.05
    dead = one_submission_at_a_time(f"send:{payout.platform_order_no}", calls=calls, wait=False)
    dead.__enter__()  # the killed sender: claimed, never released
    settings.CHANNEL_HTTP_TIMEOUT_SECONDS = timeout
    assert submit(payout).upstream_reference == ""  # its lease still runs: nothing sent
    time.sleep(0.05 * calls + 0.1)
    backdate(payout, seconds=120)  # the sweeper's re-submission, RESUBMIT_AFTER later
    payout = submit(payout)
    [(code, disbursement)] = once_across(upstreams, payout)
    assert code == payout.channel.code and disbursement["id"] == payout.upstream_reference
