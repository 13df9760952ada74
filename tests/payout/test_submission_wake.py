"""Submission after commit through the wake mark (docs/payouts.md, "Disbursement"): a burst of APPROVED payouts
queues one drain, not one message each, and that drain's first claim queues the next, so the burst is sent side by
side; no payout committed around a drain is left behind; two drains at once submit each payout once; a payout in
review is never submitted."""

import threading
import time

import pytest
from django.db import connection

from apps.channels.sandbox_payout import SandboxPayoutAdapter
from apps.payout import services, tasks
from apps.payout.models import Payout
from tests.payout.conftest import new_payout, payout_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def drains(monkeypatch):
    """The drains queued after commit (none runs until the test runs one) and the per-payout tasks (the sweeper's)."""
    queued = {"drains": 0, "single": []}
    monkeypatch.setattr(tasks.submit_approved_payouts, "delay",
                        lambda: queued.__setitem__("drains", queued["drains"] + 1))
    monkeypatch.setattr(tasks.submit_payout, "delay", queued["single"].append)
    return queued


def statuses(payouts) -> set[str]:
    return set(Payout.objects.filter(pk__in=[p.pk for p in payouts]).values_list("status", flat=True))


def test_a_burst_of_approved_creates_queues_one_drain_and_each_payout_is_submitted_once(funded, adapter_calls, drains):
    burst = [new_payout(funded, payee_account=f"0099{i:04d}") for i in range(20)]
    frozen = payout_in(funded, "FROZEN")
    assert drains["drains"] == 1  # the first create's; the others found the mark set
    assert drains["single"] == []
    assert tasks.submit_approved_payouts() == 20  # the drain finds every one
    assert drains["drains"] == 2  # its first claim queued the next drain (the chain that spreads a burst)
    assert tasks.submit_approved_payouts() == 0  # that one (or the sweeper's, a redelivery) finds none
    assert drains["drains"] == 2  # and, claiming nothing, ends the chain
    assert statuses(burst) == {"PROCESSING"}
    assert sorted(number for number, _ in adapter_calls) == sorted(p.platform_order_no for p in burst)
    assert Payout.objects.get(pk=frozen.pk).status == "FROZEN"  # in review: never submitted
    new_payout(funded, payee_account="00990100")
    assert drains["drains"] == 3  # the drain released the mark: the next create queues one again


def test_a_burst_is_spread_over_drains_in_parallel_while_the_first_waits_on_its_channel(funded, adapter_calls,
                                                                                        monkeypatch):
    """One drain queued for a burst must not send it alone, one slow channel call after another: its first claim
    queues the next drain, which takes the next payout while the first one's call is in flight."""
    burst = [new_payout(funded, payee_account=f"0095{i:04d}") for i in range(6)]
    recorded = SandboxPayoutAdapter.start_disbursement
    in_flight, most = [0], [0]
    lock = threading.Lock()
    queued = []

    def slow_start_disbursement(self, *, payout):
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        time.sleep(0.3)  # a slow channel
        with lock:
            in_flight[0] -= 1
        return recorded(self, payout=payout)

    def drain():
        try:
            services.payout_submit_drain()
        finally:
            connection.close()

    def delay():  # a worker thread picks each queued drain up at once
        thread = threading.Thread(target=drain)
        queued.append(thread)
        thread.start()

    monkeypatch.setattr(SandboxPayoutAdapter, "start_disbursement", slow_start_disbursement)
    monkeypatch.setattr(tasks.submit_approved_payouts, "delay", delay)
    delay()
    deadline = time.monotonic() + 60
    while any(thread.is_alive() for thread in queued) and time.monotonic() < deadline:
        for thread in list(queued):
            thread.join(timeout=1)
    assert statuses(burst) == {"PROCESSING"}
    assert sorted(number for number, _ in adapter_calls) == sorted(p.platform_order_no for p in burst)  # once each
    assert most[0] >= 2  # sent side by side, not one after another


def test_a_payout_committed_while_a_drain_runs_is_submitted_by_it(funded, adapter_calls, drains, monkeypatch):
    first = new_payout(funded, payee_account="00980001")
    assert drains["drains"] == 1
    recorded = SandboxPayoutAdapter.start_disbursement  # adapter_calls' recorder
    late = []

    def start_disbursement(self, *, payout):
        if not late:  # committed after the drain released the mark and claimed `first`
            late.append(new_payout(funded, payee_account="00980002"))
        return recorded(self, payout=payout)

    monkeypatch.setattr(SandboxPayoutAdapter, "start_disbursement", start_disbursement)
    assert tasks.submit_approved_payouts() == 2
    assert statuses([first, *late]) == {"PROCESSING"}
    # the drain's first claim queued the next drain, and the late create found the mark free too: a drain that
    # would have found it is queued
    assert drains["drains"] == 3


def test_a_payout_committed_while_the_mark_is_set_is_found_by_the_queued_drain(funded, adapter_calls, drains):
    from django.core.cache import cache

    for key in services.SUBMIT_WAKE_KEYS:  # a drain queued that has not looked yet
        cache.add(key, 1, 60)
    waiting = new_payout(funded, payee_account="00970001")
    assert drains["drains"] == 0
    assert tasks.submit_approved_payouts() == 1
    assert statuses([waiting]) == {"PROCESSING"}
    assert drains["drains"] == 1  # the next drain, queued by the first claim


def test_two_drains_at_once_submit_each_payout_once(funded, adapter_calls, drains, monkeypatch):
    burst = [new_payout(funded, payee_account=f"0096{i:04d}") for i in range(12)]
    recorded = SandboxPayoutAdapter.start_disbursement

    def slow_start_disbursement(self, *, payout):
        time.sleep(0.05)  # the other drain claims meanwhile
        return recorded(self, payout=payout)

    monkeypatch.setattr(SandboxPayoutAdapter, "start_disbursement", slow_start_disbursement)
    claimed = []

    def drain():
        try:
            claimed.append(services.payout_submit_drain())
        finally:
            connection.close()

    threads = [threading.Thread(target=drain) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sum(claimed) == 12 and all(claimed)  # both drains took a share (SKIP LOCKED), none twice
    assert statuses(burst) == {"PROCESSING"}
    numbers = [number for number, _ in adapter_calls]
    assert sorted(numbers) == sorted(p.platform_order_no for p in burst)  # each sent once
