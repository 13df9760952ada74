"""Drill 2: Redis (broker, nonce store, rate counters) dies while orders are created and paid, then comes back
empty (no persistence: queued messages and nonces are gone, as after a crash).

No order is lost: every create answered with code 0 is in the database; a create during the outage fails closed
with a clean 9999/500 envelope and leaves no row (the nonce store cannot prove the request is not a replay, so
the platform does not act on it). Payments completed during the outage commit, and their callbacks, which
could not be queued, are re-dispatched by the sweeper and delivered after Redis returns.
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
    api_post,
    assert_clean_error_envelope,
    elapsed_since,
    pay_create,
    pay_create_ok,
    pay_timed,
    timed,
)
from tests.faults.processes import Platform, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

REQUEST_BOUND = 10.0  # seconds: no request may hang on the dead Redis


def test_redis_outage_loses_no_order_and_every_callback_arrives_after_recovery(
        procs, private_redis, endpoints, bootstrapped, rsa_keys):
    ctx = make_merchant(rsa_keys[0], collection_callback_url=endpoints.behave("acme"))
    # The sweeper re-queues a due event only if nothing was queued for it for CALLBACK_REDISPATCH_SECONDS
    # (30 s by default); 5 s keeps the drill short and changes nothing else.
    platform = Platform(procs, private_redis, CALLBACK_REDISPATCH_SECONDS=5).start_all()

    accepted: dict[str, str] = {}  # mch_order_no -> platform_order_no, for every create answered with code 0
    paid: set[str] = set()

    def create_ok(mch_order_no: str) -> dict:
        data = pay_create_ok(platform.base, ctx, mch_order_no)
        accepted[mch_order_no] = data["platform_order_no"]
        return data

    def pay(order: dict) -> float:
        return pay_timed(order, paid)

    # Redis up: business as usual.
    before = [create_ok(f"UP-{i}") for i in range(4)]
    pay(before[0])
    wait_until(lambda: endpoints.hits_for("acme"), timeout=15, what="callback before the outage")

    private_redis.stop()
    assert not private_redis.ping()

    # Redis down. Creates: fail closed, cleanly, quickly, leaving nothing behind. A create answered with code 0
    # would have to be a real one (its order stored as answered), and is still against the decision: the nonce
    # could not be recorded.
    outage = {}
    for i in range(3):
        mch_order_no = f"DOWN-{i}"
        (status, body), seconds = timed(lambda n=mch_order_no: pay_create(platform.base, ctx, n))
        outage[mch_order_no] = (status, body.get("code"), seconds)
        assert seconds < REQUEST_BOUND, (mch_order_no, seconds)
        stored = CollectionOrder.objects.filter(mch_order_no=mch_order_no, merchant=ctx.merchant)
        if body.get("code") == "0":
            assert status == 200 and body["data"]["mch_order_no"] == mch_order_no, body
            assert list(stored.values_list("platform_order_no", "status")) == [
                (body["data"]["platform_order_no"], "CREATED")], body
            accepted[mch_order_no] = body["data"]["platform_order_no"]
        else:
            assert_clean_error_envelope(status, body, "9999", 500)
            assert not stored.exists(), mch_order_no
    assert all(code == "9999" for _, code, _ in outage.values()), f"a create succeeded without Redis: {outage}"
    (status, body), _ = timed(lambda: api_post(platform.base, ctx, "pay/query", {"mch_order_no": "UP-1"}))
    assert_clean_error_envelope(status, body, "9999", 500)
    # Payments (the upstream's notification path) need no Redis: they commit; the callback cannot be queued.
    pay_seconds = [pay(order) for order in before[1:]]
    assert max(pay_seconds) < REQUEST_BOUND, pay_seconds
    health = requests.get(f"{platform.base}/healthz", timeout=REQUEST_BOUND)
    assert health.status_code == 503 and health.json()["failing"] == ["broker"], health.text
    print(f"during the outage: creates {outage}; payments took {pay_seconds} s; healthz 503 broker")

    private_redis.start()  # same port, empty
    recovered_at = time.monotonic()
    # A worker whose task finished at the very moment the broker went away may have died in kombu ("Unrecoverable
    # error: AttributeError ... 'hostname'", its restore of unacked messages on a lost connection; docs/faults.md).
    # Production runs workers under a supervisor that restarts them (compose: restart: unless-stopped); so does this.
    dead = [proc for proc in platform.workers if not proc.alive() or "Unrecoverable error" in proc.log()]
    for proc in dead:
        proc.kill()  # one that logged it may still be shutting down
        platform.workers.remove(proc)
        platform.start_worker()
    restarted = [proc.pid for proc in dead]

    # Redis back: the web reconnects by itself (fresh nonces), and orders flow again end to end.
    wait_until(lambda: pay_create(platform.base, ctx, "PROBE")[1]["code"] == "0", timeout=15,
               what="a create succeeding after Redis came back")
    accepted["PROBE"] = CollectionOrder.objects.get(mch_order_no="PROBE").platform_order_no
    pay(create_ok("AFTER-0"))
    wait_until(lambda: CallbackEvent.objects.filter(status=CallbackEvent.Status.DELIVERED).count() == len(paid),
               timeout=45, interval=0.5, what=f"all {len(paid)} callbacks delivered after recovery")
    print(f"all {len(paid)} callbacks delivered {elapsed_since(recovered_at)} s after Redis restarted"
          f" (workers restarted by the supervisor step: {restarted or 'none'})")

    # No order lost, none invented: the database holds exactly the accepted creates.
    stored = dict(CollectionOrder.objects.values_list("mch_order_no", "platform_order_no"))
    assert stored == accepted
    assert set(CollectionOrder.objects.filter(status="SUCCESS").values_list("platform_order_no", flat=True)) == paid
    # Every paid order called back with a success reply; money posted once per order.
    delivered = {h.body["platform_order_no"] for h in endpoints.hits_for("acme")}
    assert delivered == paid
    assert set(CallbackEvent.objects.values_list("platform_order_no", flat=True)) == paid
    assert not Posting.objects.values("kind", "cause").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert Posting.objects.filter(kind="collection.success").count() == len(paid)
