"""The RabbitMQ server itself crashes and starts again while pay-ins, payouts and callbacks are in flight
(docs/faults.md, drill 8). The broker is a node of the drill's own (tests/support/rabbitmq.py, `RabbitNode`): the
machine's RabbitMQ, which other runs use, is never stopped.

Proves: web keeps answering (a create, a payment and a payout made while the broker is down commit and answer
code 0; /healthz says 503 naming the broker); the same worker, beat and web processes carry on once the server is
back, nobody restarts them; nothing is lost (the countdown task waiting in the delayed delivery's queue survives the
crash, the callback task cut mid-run is delivered again, what could not be published is queued by the sweepers);
nothing runs twice where it matters (one callback per order and status at the merchant, one posting per cause).
"""

import re
import time

import pytest
import requests

from apps.callbacks.models import CallbackEvent
from apps.channels.models import SandboxDisbursement
from apps.collection.models import CollectionOrder
from apps.payout.models import Payout
from tests.conftest import make_merchant
from tests.faults.conftest import elapsed_since, pay_create_ok, pay_through_page, payout_create_ok, timed
from tests.faults.merchant_endpoint import MerchantEndpoints
from tests.faults.processes import Platform, PrivateRabbit, wait_until
from tests.faults.test_rabbitmq import assert_money_moved_once, assert_nothing_left_in_the_broker, delivered
from tests.payout.conftest import fund

pytestmark = [pytest.mark.faults, pytest.mark.rabbitmq, pytest.mark.django_db(transaction=True)]

DOWN_SECONDS = 10  # from the crash to the start of the new server process; its start-up adds to the outage
SETTLE_SECONDS = 15  # the sandbox bank's settlement countdown: still waiting in the broker at the crash
SLOW_REPLY_SECONDS = 4  # the merchant answering the callback in flight at the crash (under the 10 s timeout)
PROMPT_SECONDS = 10  # every answer while the broker is down: no request waits on it


def received(worker_log: str, task: str) -> list[str]:
    """Task ids of `task` the worker received, once per delivery."""
    return re.findall(rf"Task {re.escape(task)}\[([0-9a-f-]+)\] received", worker_log)


def test_rabbitmq_server_crash_and_restart_loses_nothing_and_runs_nothing_twice(
        procs, private_redis, bootstrapped, rsa_keys):
    rabbit = PrivateRabbit(procs)
    rabbit.start()
    endpoints = MerchantEndpoints(stall_seconds=SLOW_REPLY_SECONDS).start()
    try:
        # The second pay-in's callback is answered slowly: its delivery task is mid-run when the server dies.
        ctx = make_merchant(rsa_keys[0], collection_callback_url=endpoints.behave("in", "ok", "stall"),
                            payout_callback_url=endpoints.behave("out"))
        fund(ctx, 1_000_000)
        platform = Platform(procs, private_redis, broker_url=rabbit.url, CALLBACK_REDISPATCH_SECONDS=5,
                            SANDBOX_PAYOUT_SETTLE_SECONDS=SETTLE_SECONDS).start_all()
        [worker], [beat] = platform.workers, [proc for proc in procs.started if proc.name == "beat"]

        first = pay_create_ok(platform.base, ctx, "RMQR-FIRST")
        assert pay_through_page(first["pay_url"]).status_code == 302
        wait_until(lambda: delivered(1), timeout=30, what="the callback before the crash")

        # In flight at the crash: a payout whose settlement waits in the delayed delivery's queue, and a callback.
        settling = payout_create_ok(platform.base, ctx, "RMQR-SETTLING")
        wait_until(lambda: SandboxDisbursement.objects.filter(platform_order_no=settling.platform_order_no).exists(),
                   timeout=30, what="the payout handed to the sandbox bank, its settlement queued")
        settlement_queued_at = time.monotonic()
        slow = pay_create_ok(platform.base, ctx, "RMQR-SLOW")
        assert pay_through_page(slow["pay_url"]).status_code == 302
        wait_until(lambda: len(endpoints.hits_for("in")) == 2, timeout=30, what="the slow callback in flight")

        rabbit.crash()
        crashed_at = time.monotonic()
        log_at_crash = len(worker.log())
        assert crashed_at - settlement_queued_at < SETTLE_SECONDS  # the settlement task was not due yet

        # Web keeps answering: what needs no broker commits; what is queued after commit waits for the sweepers.
        during, created_in = timed(lambda: pay_create_ok(platform.base, ctx, "RMQR-DURING"))
        paid, paid_in = timed(lambda: pay_through_page(during["pay_url"]))
        assert paid.status_code == 302
        payout_during, payout_in = timed(lambda: payout_create_ok(platform.base, ctx, "RMQR-DURING-OUT"))
        assert payout_during.status == Payout.Status.APPROVED
        health, health_in = timed(lambda: requests.get(f"{platform.base}/healthz", timeout=30))
        assert health.status_code == 503 and health.json()["broker"] != "ok", health.text
        assert max(created_in, paid_in, payout_in, health_in) < PROMPT_SECONDS, (created_in, paid_in, payout_in)

        time.sleep(max(0.0, DOWN_SECONDS - elapsed_since(crashed_at)))
        start_up = rabbit.start()
        outage = elapsed_since(crashed_at)
        back_at = time.monotonic()

        # The same processes reconnect by themselves.
        wait_until(lambda: worker.log().count("Connected to amqp://") >= 2, timeout=90, interval=0.2,
                   what="the worker reconnected to the restarted server")
        reconnected_in = elapsed_since(back_at)
        wait_until(lambda: requests.get(f"{platform.base}/healthz", timeout=30).status_code == 200, timeout=30,
                   what="/healthz answering 200: the web processes reach the broker again")
        after = pay_create_ok(platform.base, ctx, "RMQR-AFTER")
        assert pay_through_page(after["pay_url"]).status_code == 302

        wait_until(lambda: delivered(6), timeout=120, interval=0.5, what="every callback after the restart")
        recovered_in = elapsed_since(back_at)
        print(f"RabbitMQ down {outage} s (restart {start_up} s); answers while down: create {created_in} s, payment "
              f"{paid_in} s, payout {payout_in} s, /healthz {health_in} s; worker reconnected {reconnected_in} s and "
              f"every callback delivered {recovered_in} s after the server was back")
        # Nobody restarted anything but the server; beat sends again (only the payout sweeper submits the payout
        # made during the outage).
        assert all(proc.alive() for proc in (platform.web, worker, beat))
        assert sorted(proc.name for proc in procs.started) == ["beat", "rabbitmq", "rabbitmq", "redis", "web", "worker"]
    finally:
        endpoints.stop()

    # Nothing lost: every order at its end, every callback at the merchant, each once.
    assert set(CollectionOrder.objects.values_list("status", flat=True)) == {CollectionOrder.Status.SUCCESS}
    assert set(Payout.objects.values_list("status", flat=True)) == {Payout.Status.SUCCESS}
    pay_ins = [first, slow, during, after]
    assert sorted(h.body["platform_order_no"] for h in endpoints.hits_for("in")) == sorted(
        o["platform_order_no"] for o in pay_ins)
    assert sorted((h.body["platform_order_no"], h.body["status"]) for h in endpoints.hits_for("out")) == sorted(
        [(settling.platform_order_no, "SUCCESS"), (payout_during.platform_order_no, "SUCCESS")])
    assert CallbackEvent.objects.exclude(status=CallbackEvent.Status.DELIVERED).count() == 0
    log = worker.log()
    # Both settlements ran after the crash from the delayed delivery's queues (the sweeper applies the sandbox
    # bank's answer without this task): the one queued before the crash waited it out in the broker.
    assert len(received(log[log_at_crash:], "apps.channels.sandbox_payout.sandbox_payout_settle")) >= 2
    # The callback task cut mid-run was delivered again after the restart and found its event delivered.
    deliveries = received(log, "apps.callbacks.tasks.deliver_callback")
    assert any(deliveries.count(task_id) > 1 for task_id in set(deliveries)), deliveries
    assert_money_moved_once()

    assert_nothing_left_in_the_broker(procs, rabbit.queues)
