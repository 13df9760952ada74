"""Drill 5: Redis hangs (SIGSTOP) instead of dying: connections are still accepted and commands taken, nothing is
answered, as with a Redis swapping, stuck in a long script or behind a black-holed network path.

Without socket timeouts every request that touches Redis (the signature's nonce, a task publish after commit)
would wait forever and gunicorn would kill its workers one by one. With them (settings.REDIS_SOCKET_TIMEOUT): a
create fails closed within seconds with the clean 9999/500 envelope and stores nothing; a payment commits and
answers, its callback left to the sweeper; /healthz says the broker is failing. When Redis answers again nothing
needs a restart: creates succeed and every callback arrives.
"""

import time

import pytest
import requests
from django.db.models import Count

from apps.callbacks.models import CallbackEvent
from apps.collection.models import CollectionOrder
from apps.ledger.models import Posting
from tests.conftest import make_merchant
from tests.faults.conftest import (
    assert_clean_error_envelope,
    elapsed_since,
    pay_create,
    pay_create_ok,
    pay_timed,
    timed,
)
from tests.faults.processes import Platform, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

# A request touching the hung Redis waits at most two socket timeouts (2 s each: connect or reply), a publish
# after commit two tries of that; well under gunicorn's worker timeout (60 s in the drills, 30 s in production).
REQUEST_BOUND = 12.0


def test_hung_redis_bounds_every_request_and_recovers_without_a_restart(
        procs, private_redis, endpoints, bootstrapped, rsa_keys):
    ctx = make_merchant(rsa_keys[0], collection_callback_url=endpoints.behave("acme"))
    platform = Platform(procs, private_redis, CALLBACK_REDISPATCH_SECONDS=5).start_all()

    accepted = {f"UP-{i}": pay_create_ok(platform.base, ctx, f"UP-{i}") for i in range(3)}
    paid: set[str] = set()

    def pay(order: dict) -> float:
        return pay_timed(order, paid)

    pay(accepted["UP-0"])
    wait_until(lambda: endpoints.hits_for("acme"), timeout=15, what="callback before Redis hung")

    private_redis.freeze()
    assert not private_redis.ping()

    # Creates: each answers within the bound, fails closed, leaves no row.
    for i in range(2):
        (status, body), seconds = timed(lambda n=f"HUNG-{i}": pay_create(platform.base, ctx, n))
        assert seconds < REQUEST_BOUND, seconds
        assert_clean_error_envelope(status, body, "9999", 500)
    assert not CollectionOrder.objects.filter(mch_order_no__startswith="HUNG-").exists()
    # Payments commit and answer; the callback publish gives up after its two tries.
    pay_seconds = [pay(accepted[name]) for name in ("UP-1", "UP-2")]
    assert max(pay_seconds) < REQUEST_BOUND, pay_seconds
    health, seconds = timed(lambda: requests.get(f"{platform.base}/healthz", timeout=30))
    assert seconds < REQUEST_BOUND, seconds
    assert health.status_code == 503 and "broker" in health.json()["failing"], health.text
    print(f"Redis hung: pay/create failed closed, payments took {pay_seconds} s, healthz {seconds} s")

    private_redis.thaw()
    thawed_at = time.monotonic()

    # The same processes carry on: a create succeeds, every paid order is called back.
    wait_until(lambda: pay_create(platform.base, ctx, "PROBE")[1]["code"] == "0", timeout=20,
               what="a create succeeding after Redis answered again")
    pay(pay_create_ok(platform.base, ctx, "AFTER-0"))
    wait_until(lambda: CallbackEvent.objects.filter(status=CallbackEvent.Status.DELIVERED).count() == len(paid),
               timeout=45, interval=0.5, what=f"all {len(paid)} callbacks delivered after Redis answered again")
    print(f"all {len(paid)} callbacks delivered {elapsed_since(thawed_at)} s after Redis answered again")

    assert set(CollectionOrder.objects.values_list("mch_order_no", flat=True)) == {*accepted, "PROBE", "AFTER-0"}
    assert {h.body["platform_order_no"] for h in endpoints.hits_for("acme")} == paid
    assert not Posting.objects.values("kind", "cause").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert Posting.objects.filter(kind="collection.success").count() == len(paid)
    for proc in (platform.web, *platform.workers):
        assert proc.alive(), proc.tail()
