"""A refund's submission after commit through the wake mark (apps/collection/refunds.py): a burst of refunds queues
one drain, not one message each; the drain hands each refund to its channel once, also when two drains run at once
or one is queued again; a refund committed while the mark is set is found; a refund whose drain never came, or whose
hand-off died after the drain took it, is the sweep's, which asks the channel first."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.channels.sandbox_payin import SandboxPayinAdapter
from apps.collection import refunds, tasks
from apps.collection.models import Refund
from apps.collection.refunds import refund_create
from tests.collection.test_refunds import paid_order
from tests.helpers import at_once

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def drains(monkeypatch):
    """How many drains were queued after commit (none runs until the test runs one)."""
    queued = [0]
    monkeypatch.setattr(tasks.submit_refunds, "delay", lambda: queued.__setitem__(0, queued[0] + 1))
    return queued


@pytest.fixture
def sent(monkeypatch):
    """The refund_no of every refund handed to the sandbox, in order."""
    numbers = []
    recorded = SandboxPayinAdapter.start_refund

    def start_refund(self, *, refund):
        numbers.append(refund.refund_no)
        return recorded(self, refund=refund)

    monkeypatch.setattr(SandboxPayinAdapter, "start_refund", start_refund)
    return numbers


def make_refunds(merchant, order, count: int, prefix: str) -> list[Refund]:
    return [refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no,
                          mch_refund_no=f"{prefix}-{i}", amount=1_000) for i in range(count)]


def references(made: list[Refund]) -> set[str]:
    return set(Refund.objects.filter(pk__in=[r.pk for r in made]).values_list("upstream_reference", flat=True))


def test_a_burst_of_refunds_queues_one_drain_that_hands_each_to_its_channel_once(client, merchant, drains, sent):
    order = paid_order(client, merchant, amount=100_000)
    burst = make_refunds(merchant, order, 8, "BURST")
    assert drains[0] == 1  # the first refund's; the others found the mark set
    assert tasks.submit_refunds() == 8  # the drain finds every one
    assert drains[0] == 2  # its first refund queued the next drain (the chain that spreads a burst)
    assert tasks.submit_refunds() == 0  # that one (or the same message again) finds none
    assert drains[0] == 2  # and, taking nothing, ends the chain
    assert sorted(sent) == sorted(r.refund_no for r in burst)
    assert references(burst) == {f"SBXR{r.refund_no}" for r in burst}
    assert Refund.objects.filter(pk__in=[r.pk for r in burst], submitted_at__isnull=True).count() == 0
    make_refunds(merchant, order, 1, "AFTER")
    assert drains[0] == 3  # the drain released the mark: the next refund queues one again


def test_a_refund_committed_while_the_mark_is_set_is_found_by_the_queued_drain(client, merchant, drains, sent):
    from django.core.cache import cache

    order = paid_order(client, merchant, amount=100_000)
    for key in refunds.REFUND_SUBMIT_WAKE_KEYS:  # a drain queued that has not looked yet
        cache.add(key, 1, 60)
    waiting = make_refunds(merchant, order, 1, "WAIT")
    assert drains[0] == 0
    assert tasks.submit_refunds() == 1
    assert sent == [waiting[0].refund_no]


def test_two_drains_at_once_hand_each_refund_to_its_channel_once(client, merchant, drains, sent, monkeypatch):
    order = paid_order(client, merchant, amount=100_000)
    burst = make_refunds(merchant, order, 10, "TWO")
    recorded = SandboxPayinAdapter.start_refund

    def slow_start_refund(self, *, refund):
        time.sleep(0.05)  # the other drain takes the next refund meanwhile
        return recorded(self, refund=refund)

    monkeypatch.setattr(SandboxPayinAdapter, "start_refund", slow_start_refund)
    outcomes = at_once(lambda i: refunds.refund_submit_drain(), 2)
    assert [exc for _, exc in outcomes] == [None, None]
    taken = [count for count, _ in outcomes]
    assert sum(taken) == 10 and all(taken)  # both drains took a share (SKIP LOCKED), none twice
    assert sorted(sent) == sorted(r.refund_no for r in burst)  # each sent once
    assert references(burst) == {f"SBXR{r.refund_no}" for r in burst}


def test_a_refund_whose_drain_never_came_is_submitted_by_the_sweep(client, merchant, drains, sent):
    order = paid_order(client, merchant, amount=100_000)
    lost = make_refunds(merchant, order, 1, "LOST")[0]  # its drain's message is lost (the fixture queues nothing)
    assert refunds.refunds_sweep() == {}  # too recent: its drain may still come
    assert refunds.refunds_sweep(now=timezone.now() + timedelta(minutes=1)) == {"refund.unsubmitted": 1}
    assert sent == [lost.refund_no]
    assert tasks.submit_refunds() == 0  # the sweep marked it submitted: a late drain does not send it again
    assert sent == [lost.refund_no]


def test_a_refund_whose_hand_off_died_after_a_drain_took_it_is_not_taken_again_and_the_sweep_finishes_it(
        client, merchant, drains, sent, monkeypatch):
    order = paid_order(client, merchant, amount=100_000)
    refund = make_refunds(merchant, order, 1, "DIED")[0]
    recorded = SandboxPayinAdapter.start_refund

    def dies(self, *, refund):
        raise RuntimeError("worker lost mid-call")

    monkeypatch.setattr(SandboxPayinAdapter, "start_refund", dies)
    assert tasks.submit_refunds() == 1  # taken, its hand-off failed (logged)
    monkeypatch.setattr(SandboxPayinAdapter, "start_refund", recorded)
    assert tasks.submit_refunds() == 0  # marked submitted: no drain sends it blind
    refund.refresh_from_db()
    assert refund.status == "PROCESSING" and refund.submitted_at and not refund.upstream_reference
    # The sweep asks the sandbox first, which has none of it, then submits it.
    assert refunds.refunds_sweep(now=timezone.now() + timedelta(minutes=1)) == {"refund.unsubmitted": 1}
    refund.refresh_from_db()
    assert refund.upstream_reference == f"SBXR{refund.refund_no}"
