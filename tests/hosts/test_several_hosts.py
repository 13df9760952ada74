"""Two hosts behind one proxy (docs/deployment.md, "Several hosts"): each its own gunicorn, Celery worker and beat on
its own loopback address, HAProxy spreading requests over them, PgBouncer in transaction pooling between them and the
database, one Redis for the broker and the cache. A burst of signed pay-ins, payer presses and payouts through the
proxy; one host SIGKILLed whole in the middle of it, the burst going on, the host started again. Then every order is
terminal, each callback succeeded once, the ledger verifies, and the merchants saw a 5xx only while the host died."""

import random
import re
import threading
import time
import uuid
from dataclasses import dataclass, field

import pytest
import requests
from django.db.models import Count

from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.collection.models import CollectionOrder
from apps.ledger.models import Posting
from apps.ledger.selectors import ledger_verify
from apps.ledger.services import balance_adjust
from apps.payout.models import Payout
from tests.conftest import make_merchant
from tests.support.hosts import hosts_start
from tests.support.wait import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

CLIENTS = 2
PHASE_SECONDS = 6  # the burst before the kill, while the host is dead, and after it is back
# A request in flight on the host when it died is answered 502 by the proxy; the proxy stops sending it new ones
# after two failed health checks half a second apart. The window a 5xx may come in, from the kill.
KILL_WINDOW_SECONDS = 3
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
TERMINAL_PAYOUT = {Payout.Status.SUCCESS, Payout.Status.FAILED}


@dataclass
class Answer:
    at: float  # time.monotonic()
    what: str
    status: int  # 0: the connection failed
    detail: str = ""  # a failure's error or the start of its body


@dataclass
class Burst:
    base: str
    contexts: list
    stop: threading.Event = field(default_factory=threading.Event)
    answers: list[Answer] = field(default_factory=list)
    pay_ins: set[str] = field(default_factory=set)  # mch_order_no answered code 0
    payouts: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    def _send(self, what: str, call) -> requests.Response | None:
        """One request, its answer recorded; a connection failure or a 5xx tried again, as a merchant's client
        does (the same mch_order_no: a create is idempotent, docs/api.md)."""
        for _ in range(10):
            try:
                response = call()
            except requests.RequestException as exc:
                self.answers.append(Answer(time.monotonic(), what, 0, type(exc).__name__))
            else:
                detail = response.text[:120] if response.status_code >= 500 else ""
                self.answers.append(Answer(time.monotonic(), what, response.status_code, detail))
                if response.status_code < 500:
                    return response
            time.sleep(0.2)
        self.errors.append(f"{what}: no answer below 500 in 10 tries")
        return None

    def _create(self, ctx, path: str, business: dict) -> dict | None:
        response = self._send(path, lambda: requests.post(
            f"{self.base}/openapi/v1/{path}", json=ctx.signed_body(business), timeout=30))
        if response is None:
            return None
        body = response.json()
        if (response.status_code, body["code"]) != (200, "0"):
            self.errors.append(f"{path} {business['mch_order_no']}: {response.status_code} {body}")
            return None
        return body["data"]

    def _press_pay(self, pay_url: str) -> None:
        """The payer on the hosted page: open it, press Pay (the page and the press may reach different hosts)."""
        with requests.Session() as session:
            page = self._send("pay page", lambda: session.get(pay_url, timeout=30))
            if page is None:
                return
            token = CSRF.search(page.text).group(1)
            self._send("pay press", lambda: session.post(
                pay_url, data={"csrfmiddlewaretoken": token, "action": "pay"}, allow_redirects=False, timeout=30))

    def client(self, seed: int) -> None:
        rng = random.Random(seed)
        ctx = self.contexts[seed % len(self.contexts)]
        try:
            while not self.stop.is_set():
                number = f"in-{uuid.uuid4().hex[:20]}"
                order = self._create(ctx, "pay/create", {
                    "mch_order_no": number, "product_code": "PHP_COLLECT_D0", "amount": rng.randint(100, 200_000),
                    "currency": "PHP", "subject": "several hosts"})
                if order is not None:
                    self.pay_ins.add(number)
                    self._press_pay(order["pay_url"])
                number = f"out-{uuid.uuid4().hex[:20]}"
                payout = self._create(ctx, "payout/create", {
                    "mch_order_no": number, "product_code": "PHP_PAYOUT", "amount": rng.randint(100, 100_000),
                    "currency": "PHP", "payee_name": "Juan dela Cruz", "bank_code": "BDO",
                    "payee_account": f"{rng.randint(10**9, 10**10 - 1)}{rng.randint(5000, 9999)}"})
                if payout is not None:
                    self.payouts.add(number)
        except Exception as exc:  # noqa: BLE001 - the test fails on it, with the error
            self.errors.append(f"client {seed}: {type(exc).__name__}: {exc}")


def test_a_host_killed_whole_under_a_burst_through_the_proxy_loses_nothing_and_comes_back(
        procs, private_redis, bouncer, receiver, bootstrapped, rsa_keys):
    started = time.monotonic()
    contexts = []
    for i, key in enumerate(rsa_keys[:2]):
        ctx = make_merchant(key, name=f"Hosts {i}", collection_callback_url=f"{receiver.url}/{i}/collection",
                            payout_callback_url=f"{receiver.url}/{i}/payout")
        balance_adjust(merchant_no=ctx.merchant_no, currency="PHP", amount=10**10, reason="several hosts float")
        contexts.append(ctx)

    # CALLBACK_TIMEOUT_SECONDS=1: the lease of an attempt cut by the kill runs out in 33 s, not 60 (the receiver
    # answers at once).
    hosts, proxy = hosts_start(procs, private_redis, bouncer, count=2, CALLBACK_TIMEOUT_SECONDS=1, BEAT_LOCK_SECONDS=5)

    ready = time.monotonic()
    burst = Burst(proxy.base, contexts)
    clients = [threading.Thread(target=burst.client, args=(seed,)) for seed in range(CLIENTS)]
    for client in clients:
        client.start()
    try:
        time.sleep(PHASE_SECONDS)
        doomed = hosts[0]
        killed_at = time.monotonic()
        doomed.kill()
        wait_until(lambda: proxy.servers()["host0"]["status"] == "DOWN", timeout=10, interval=0.1,
                   what="the proxy seeing the host down")
        time.sleep(PHASE_SECONDS)
        back_at = time.monotonic()
        doomed.start()
        wait_until(lambda: proxy.servers()["host0"]["status"] == "UP", timeout=30, interval=0.2,
                   what="the proxy sending to the host again")
        time.sleep(PHASE_SECONDS)
    finally:
        burst.stop.set()
        for client in clients:
            client.join(timeout=120)
    load_ended = time.monotonic()
    assert not burst.errors, burst.errors[:5]

    # A 5xx or a refused connection only while the host died: never before the kill, nor once the proxy saw it dead
    # (nor while it started again: the proxy sends it nothing until /healthz answers 200).
    failed = [a for a in burst.answers if a.status == 0 or a.status >= 500]
    outside = [(round(a.at - killed_at, 2), a.what, a.status, a.detail) for a in failed
               if not killed_at <= a.at <= killed_at + KILL_WINDOW_SECONDS]
    assert outside == [], outside
    requests_sent = len(burst.answers)
    assert len(burst.pay_ins) >= 15 and len(burst.payouts) >= 15, (len(burst.pay_ins), len(burst.payouts))
    served_by = {name: int(row["stot"]) for name, row in proxy.servers().items()}
    assert len(served_by) == 2 and all(served_by.values()), served_by  # both hosts took requests

    # Every order terminal: each pay-in paid (the payer pressed Pay), each payout settled by the sandbox bank; the
    # sweepers finish whatever the dead host's worker was doing.
    def all_terminal() -> bool:
        paid = CollectionOrder.objects.filter(mch_order_no__in=burst.pay_ins, status=CollectionOrder.Status.SUCCESS)
        settled = Payout.objects.filter(mch_order_no__in=burst.payouts, status__in=TERMINAL_PAYOUT)
        return paid.count() == len(burst.pay_ins) and settled.count() == len(burst.payouts)

    wait_until(all_terminal, timeout=90, interval=1, what="every pay-in paid and every payout settled")
    expected = set(CollectionOrder.objects.filter(mch_order_no__in=burst.pay_ins).values_list(
        "platform_order_no", flat=True)) | set(Payout.objects.filter(mch_order_no__in=burst.payouts).values_list(
            "platform_order_no", flat=True))

    # Each callback succeeded once. The merchant saw one twice only if its first attempt was cut by the kill
    # (at-least-once: the attempt's lease ran out, the sweeper counted it lost, the retry came).
    wait_until(lambda: CallbackEvent.objects.filter(platform_order_no__in=expected,
                                                    status=CallbackEvent.Status.DELIVERED).count() == len(expected),
               timeout=180, interval=1, what="a delivered callback for every order")
    time.sleep(2)  # a duplicate would come now
    successes = CallbackAttempt.objects.filter(success=True, event__platform_order_no__in=expected)
    per_order = successes.values("event__platform_order_no").annotate(n=Count("id"))
    assert {row["event__platform_order_no"] for row in per_order} == expected
    assert [row for row in per_order if row["n"] != 1] == []
    lost = set(CallbackAttempt.objects.filter(error__contains="worker lost").values_list(
        "event__platform_order_no", flat=True))
    received: dict[str, int] = {}
    for request in receiver.requests:
        received[request.body["platform_order_no"]] = received.get(request.body["platform_order_no"], 0) + 1
    assert set(received) == expected
    assert {number for number, times in received.items() if times > 1} <= lost

    # Money moved once per order, and the ledger verifies.
    per_cause = Posting.objects.values("kind", "cause").annotate(n=Count("id"))
    assert [p for p in per_cause if p["n"] > 1] == []
    checked = time.monotonic()
    verified = ledger_verify()
    assert verified["ok"], verified
    print(f"{requests_sent} requests ({len(failed)} failed, all within {KILL_WINDOW_SECONDS} s of the kill), "
          f"{len(burst.pay_ins)} pay-ins and {len(burst.payouts)} payouts through the proxy; requests per host "
          f"{list(served_by.values())}; host started again {back_at - killed_at:.1f} s after the kill; every "
          f"callback delivered {checked - load_ended:.1f} s after the load; hosts up in {ready - started:.1f} s; "
          f"ledger verified in {time.monotonic() - checked:.1f} s")
