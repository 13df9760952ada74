"""The platform on RabbitMQ, production's broker (docs/architecture.md, "The broker"): gunicorn, a Celery worker and
beat with CELERY_BROKER_URL on a RabbitMQ vhost of the drill's own (Redis stays the cache, nonces and rate counters).

- A pay-in and two payouts reach their terminal state and their callbacks arrive; the payouts' settlement and the
  sandbox bank's return are countdown tasks, delivered through RabbitMQ's native delayed delivery; the task queue
  is a quorum queue.
- A worker SIGKILLed inside a task: RabbitMQ gives the unacknowledged message back at once (no visibility timeout),
  the next worker runs it, and it does nothing twice.
- The broker's connection cut and back: nothing paid is lost, every callback arrives.
"""

import re
import time

import pytest
from django.db.models import Count

from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.collection.models import CollectionOrder
from apps.ledger.models import Posting
from apps.ledger.selectors import ledger_verify
from apps.payout.models import Payout
from tests.conftest import make_merchant
from tests.faults.conftest import api_post, elapsed_since, pay_create_ok, pay_through_page, payout_create_ok
from tests.faults.processes import Platform, wait_until
from tests.faults.tcp_gate import TcpGate
from tests.payout.conftest import fund

pytestmark = [pytest.mark.faults, pytest.mark.rabbitmq, pytest.mark.django_db(transaction=True)]

RECEIVED = re.compile(r"Task apps\.callbacks\.tasks\.deliver_callback\[([0-9a-f-]+)\] received")


def delivered(count: int) -> bool:
    return CallbackEvent.objects.filter(status=CallbackEvent.Status.DELIVERED).count() == count


def assert_money_moved_once() -> None:
    assert not Posting.objects.values("kind", "cause").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert ledger_verify()["ok"]


def assert_nothing_left_in_the_broker(procs, queues) -> None:
    """Stops beat, then waits until every queue (`queues()`: the task queue and the delayed delivery's) is empty, no
    message ready or unacknowledged. Beat sends a sweep every 5-15 s, each one a message in the task queue while a
    worker runs it: with beat running, a look finds one of them in flight about one time in four on a loaded host,
    and each look is a `rabbitmqctl` call of its own (1.2 s idle, 3-6 s at load average 16)."""
    for beat in (proc for proc in procs.started if proc.name == "beat"):
        beat.stop()
    wait_until(lambda: all(q["ready"] == q["unacked"] == 0 for q in queues().values()), timeout=30, interval=0.5,
               what="every queue drained (no message ready or unacknowledged)")


def test_payin_payout_and_countdown_task_end_to_end_on_quorum_queues(
        procs, private_redis, rabbit_vhost, endpoints, bootstrapped, rsa_keys):
    ctx = make_merchant(rsa_keys[0], collection_callback_url=endpoints.behave("shop-in"),
                        payout_callback_url=endpoints.behave("shop-out"))
    fund(ctx, 1_000_000)
    platform = Platform(procs, private_redis, broker_url=rabbit_vhost.url).start_all()

    order = pay_create_ok(platform.base, ctx, "RMQ-IN")
    assert pay_through_page(order["pay_url"]).status_code == 302
    payout = payout_create_ok(platform.base, ctx, "RMQ-OUT")  # sandbox: approved on creation, settled by countdown
    # An account ending 4001: paid, then returned by the sandbox bank (a second countdown task), reversed.
    status, body = api_post(platform.base, ctx, "payout/create", {
        "mch_order_no": "RMQ-BACK", "product_code": "PHP_PAYOUT", "amount": 10000, "currency": "PHP",
        "payee_name": "Juan dela Cruz", "payee_account": "0055554001", "bank_code": "BDO"})
    assert (status, body["code"]) == (200, "0"), body
    returned = body["data"]["platform_order_no"]

    wait_until(lambda: delivered(4), timeout=60, interval=0.3, what="the pay-in's, payouts' and reversal's callbacks")
    assert Payout.objects.get(pk=payout.pk).status == Payout.Status.SUCCESS
    assert Payout.objects.get(platform_order_no=returned).reversed_at is not None
    assert CollectionOrder.objects.get(mch_order_no="RMQ-IN").status == CollectionOrder.Status.SUCCESS
    assert [h.body["platform_order_no"] for h in endpoints.hits_for("shop-in")] == [order["platform_order_no"]]
    assert sorted((h.body["platform_order_no"], h.body.get("event") or h.body["status"])
                  for h in endpoints.hits_for("shop-out")) == sorted([
        (payout.platform_order_no, "SUCCESS"), (returned, "SUCCESS"), (returned, "payout.reversed")])
    # The task queue is a quorum queue, bound for delayed delivery; nothing is left in it or in the delayed queues.
    queues = rabbit_vhost.queues()
    assert queues["celery"]["type"] == "quorum", queues
    assert any(name.startswith("celery_delayed_") for name in queues), queues
    assert_money_moved_once()
    assert_nothing_left_in_the_broker(procs, rabbit_vhost.queues)


def test_worker_killed_mid_task_gets_its_message_redelivered_at_once_and_does_nothing_twice(
        procs, private_redis, rabbit_vhost, endpoints, bootstrapped, rsa_keys):
    url = endpoints.behave("slow", "stall", default="ok")  # the first callback stalls: its task is mid-run
    ctx = make_merchant(rsa_keys[0], collection_callback_url=url)
    platform = Platform(procs, private_redis, broker_url=rabbit_vhost.url)
    platform.start_web()
    doomed = platform.start_worker()  # no beat: the sweeper does not queue the event again meanwhile

    order = pay_create_ok(platform.base, ctx, "RMQ-KILL")
    assert pay_through_page(order["pay_url"]).status_code == 302
    wait_until(lambda: endpoints.hits_for("slow"), timeout=20, what="the callback in flight")
    [task_id] = RECEIVED.findall(doomed.log())

    doomed.kill()
    killed_at = time.monotonic()
    doomed.popen.wait(timeout=10)
    assert f"[{task_id}] succeeded" not in doomed.log()  # killed mid-run: acks_late, the message was not acknowledged
    successor = platform.start_worker()
    wait_until(lambda: task_id in RECEIVED.findall(successor.log()), timeout=20, what="the message redelivered")
    redelivered_in = elapsed_since(killed_at)
    print(f"worker SIGKILLed mid-task; its message was delivered to the next worker {redelivered_in} s later")
    wait_until(lambda: rabbit_vhost.queues()["celery"] == {"type": "quorum", "ready": 0, "unacked": 0}, timeout=20,
               what="the redelivered task acknowledged")
    # The redelivered task found the event leased by the lost attempt and made no second one: the sweeper closes
    # the lost attempt when its lease runs out (tests/faults/test_worker_killed.py waits for that on Redis).
    event = CallbackEvent.objects.get(platform_order_no=order["platform_order_no"])
    assert CallbackAttempt.objects.filter(event=event).count() == 1
    assert len(endpoints.hits_for("slow")) == 1
    assert Posting.objects.filter(kind="collection.success").count() == 1
    assert_money_moved_once()


def test_broker_connection_cut_and_back_loses_no_callback(procs, private_redis, rabbit_vhost, endpoints,
                                                          bootstrapped, rsa_keys):
    ctx = make_merchant(rsa_keys[0], collection_callback_url=endpoints.behave("shop"))
    gate = TcpGate(5672)
    try:
        platform = Platform(procs, private_redis, broker_url=rabbit_vhost.url_through(gate.port),
                            CALLBACK_REDISPATCH_SECONDS=5).start_all()
        paid = []
        for name in ("BEFORE", "DURING", "AFTER"):
            order = pay_create_ok(platform.base, ctx, f"RMQ-{name}")
            if name == "DURING":
                gate.cut()
            assert pay_through_page(order["pay_url"]).status_code == 302  # needs no broker: commits, queues later
            paid.append(order["platform_order_no"])
            if name == "BEFORE":
                wait_until(lambda: delivered(1), timeout=20, what="the callback before the cut")
            if name == "DURING":
                time.sleep(3)
                gate.open()
                reopened_at = time.monotonic()
        # A worker that gave up on the lost connection is restarted, as production's supervisor does.
        for proc in [p for p in platform.workers if not p.alive()]:
            platform.workers.remove(proc)
            platform.start_worker()
        wait_until(lambda: delivered(3), timeout=60, interval=0.5, what="every callback after the broker came back")
        print(f"all 3 callbacks delivered {elapsed_since(reopened_at)} s after the broker's connection came back")
    finally:
        gate.close()
    assert sorted(h.body["platform_order_no"] for h in endpoints.hits_for("shop")) == sorted(paid)
    assert Posting.objects.filter(kind="collection.success").count() == 3
    assert_money_moved_once()
