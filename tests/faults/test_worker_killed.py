"""Drill 1: a Celery worker SIGKILLed while it is inside merchants' HTTP calls, then a new worker started.

Every callback still arrives (when a lost attempt's lease runs out the sweeper counts it as a failed attempt, and
the retry follows the schedule; messages the dead worker had prefetched are re-dispatched too), and no ledger
posting is duplicated.
"""

import time
from datetime import timedelta

import pytest
from django.db.models import Count

from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.callbacks.deliver import lease_seconds
from apps.collection.models import CollectionOrder
from apps.ledger.models import Posting
from apps.ledger.selectors import ledger_verify
from tests.conftest import make_merchant
from tests.faults.conftest import elapsed_since, pay_create_ok, pay_through_page
from tests.faults.processes import Platform, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

ORDERS = 6


def test_worker_killed_mid_delivery_every_callback_still_arrives_once_posted(
        procs, private_redis, endpoints, bootstrapped, rsa_keys, settings):
    # The shortest lease the platform allows: CALLBACK_LEASE_SECONDS is floored at 3 × the contractual 10 s
    # timeout + 30 s = 60 s, so a live worker never loses its lease; the drill waits for it for real.
    settings.CALLBACK_LEASE_SECONDS = 1
    # The merchant's endpoint stalls the first two callbacks: both pool processes are inside the HTTP call.
    url = endpoints.behave("acme", "stall", "stall", default="ok")
    ctx = make_merchant(rsa_keys[0], collection_callback_url=url)
    platform = Platform(procs, private_redis, CALLBACK_LEASE_SECONDS=1)
    platform.start_web()
    platform.start_beat()
    doomed = platform.start_worker()

    orders = [pay_create_ok(platform.base, ctx, f"KILL-{i}") for i in range(ORDERS)]
    for order in orders:
        assert pay_through_page(order["pay_url"]).status_code == 302
    wait_until(lambda: len(endpoints.hits_for("acme")) >= 2, timeout=20, what="two deliveries in flight")
    # Every answered attempt is written as its POST ends, whatever its batch (docs/callbacks.md, Delivery): within
    # moments only the two stalled attempts are in flight, well before the 10 s deadline would cut them.
    in_flight = []

    def only_the_stalled_in_flight():
        in_flight[:] = CallbackAttempt.objects.filter(finished_at__isnull=True).values_list("event_id", flat=True)
        return len(in_flight) == 2

    wait_until(only_the_stalled_in_flight, timeout=5, what="only the two stalled attempts in flight")
    stalled = {h.body["platform_order_no"] for h in endpoints.hits_for("acme") if h.behaviour == "stall"}
    assert len(stalled) == 2 and len(in_flight) == 2
    assert stalled == set(CallbackEvent.objects.filter(pk__in=in_flight).values_list("platform_order_no", flat=True))

    doomed.kill()  # SIGKILL to the worker's process group: main process and both pool children, mid-request
    killed_at = time.monotonic()
    doomed.popen.wait(timeout=10)
    platform.start_worker()

    # Bounded by the lease (a lost attempt blocks its event until then), the first retry delay (the lost attempt
    # failed when its lease ran out; the schedule of docs/api.md, "Callbacks", goes on from there), two sweeps and a
    # margin.
    first_retry = settings.CALLBACK_RETRY_DELAYS_SECONDS[0]
    budget = lease_seconds() + first_retry + 2 * 5 + 20
    wait_until(lambda: CallbackEvent.objects.filter(status=CallbackEvent.Status.DELIVERED).count() == ORDERS,
               timeout=budget, interval=0.5, what=f"all {ORDERS} callbacks delivered after the kill")
    recovered_in = elapsed_since(killed_at)
    print(f"worker SIGKILLed with 2 attempts in flight; all {ORDERS} delivered {recovered_in} s after the kill "
          f"(lease {lease_seconds()} s)")

    # Every order's callback reached the merchant with a success reply, each order exactly one success.
    numbers = {o["platform_order_no"] for o in orders}
    successes = CallbackAttempt.objects.filter(success=True).values_list("event__platform_order_no", flat=True)
    assert sorted(successes) == sorted(numbers)
    assert {h.body["platform_order_no"] for h in endpoints.hits_for("acme") if h.behaviour == "ok"} == numbers
    # The two attempts cut off by the kill are closed as lost and counted, as failed when their lease ran out; an
    # answered attempt whose batch was still open is not: the sweeper applied its written outcome.
    lost = CallbackAttempt.objects.filter(event_id__in=in_flight, number=1)
    lease = timedelta(seconds=lease_seconds())
    assert all("worker lost" in a.error and not a.success for a in lost), [a.error for a in lost]
    assert all(a.finished_at == a.started_at + lease for a in lost)
    for attempt in CallbackAttempt.objects.filter(event_id__in=in_flight, number=2):
        # Nobody took a leased event early, and the retry came when the schedule says: 15 s after the lease ran out.
        assert attempt.started_at >= lost.get(event_id=attempt.event_id).finished_at + timedelta(seconds=first_retry)

    # Money moved once per order, whatever happened to the deliveries.
    assert CollectionOrder.objects.filter(status=CollectionOrder.Status.SUCCESS).count() == ORDERS
    per_cause = Posting.objects.values("kind", "cause").annotate(n=Count("id"))
    assert [p for p in per_cause if p["n"] > 1] == []
    assert Posting.objects.filter(kind="collection.success").count() == ORDERS
    assert ledger_verify()["ok"]
