"""Fixtures of the fault drills (docs/faults.md): real processes on the test's PostgreSQL database, a private
Redis per drill, merchant endpoints on 127.0.0.1. Every process a drill starts is ended at teardown."""

import json
import re
import time

import pytest
import requests

from apps.ledger.models import Hold, LedgerAccount, Posting
from apps.payout.models import Payout
from tests.faults.merchant_endpoint import MerchantEndpoints
from tests.faults.processes import PrivateRedis, Processes
from tests.helpers import MerchantCtx


@pytest.fixture
def procs(transactional_db, tmp_path, request):
    """Process launcher; teardown ends every process group it started (before the database is flushed)."""
    processes = Processes(tmp_path)
    yield processes
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        print(processes.tails())  # shown by pytest with the failure
    processes.stop_all()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.rep_call = report
    return report


@pytest.fixture
def private_redis(procs) -> PrivateRedis:
    """A redis-server of this drill's own (never the machine's shared one): broker, nonces, rate counters."""
    return PrivateRedis(procs).start()


@pytest.fixture
def rabbit_vhost():
    """A RabbitMQ vhost of this drill's own on the machine's RabbitMQ (tests/support/rabbitmq.py), removed after."""
    from tests.support.rabbitmq import RabbitVhost

    vhost = RabbitVhost("drill").create()
    yield vhost
    vhost.delete()


@pytest.fixture
def endpoints():
    server = MerchantEndpoints().start()
    yield server
    server.stop()


# ------------------------------------------------------------------------------- merchant-side client

def api_post(base: str, ctx: MerchantCtx, path: str, business: dict, timeout: float = 30) -> tuple[int, dict]:
    """A signed request over real HTTP, as a merchant's integration sends it."""
    response = requests.post(f"{base}/openapi/v1/{path}", data=json.dumps(ctx.signed_body(business)),
                             headers={"Content-Type": "application/json"}, timeout=timeout)
    return response.status_code, response.json()


def pay_create(base: str, ctx: MerchantCtx, mch_order_no: str, amount: int = 10000) -> tuple[int, dict]:
    return api_post(base, ctx, "pay/create", {"mch_order_no": mch_order_no, "product_code": "PHP_COLLECT_D0",
                                              "amount": amount, "currency": "PHP", "subject": "drill"})


def pay_create_ok(base: str, ctx: MerchantCtx, mch_order_no: str, amount: int = 10000) -> dict:
    status, body = pay_create(base, ctx, mch_order_no, amount)
    assert (status, body["code"]) == (200, "0"), body
    return body["data"]


def payout_create(base: str, ctx: MerchantCtx, mch_order_no: str) -> tuple[int, dict]:
    return api_post(base, ctx, "payout/create", {
        "mch_order_no": mch_order_no, "product_code": "PHP_PAYOUT", "amount": 10000, "currency": "PHP",
        "payee_name": "Juan dela Cruz", "payee_account": "0012345678", "bank_code": "BDO"})


def payout_create_ok(base: str, ctx: MerchantCtx, mch_order_no: str) -> Payout:
    """A payout answered with code 0, as stored: its hold freezes amount + fee."""
    status, body = payout_create(base, ctx, mch_order_no)
    assert (status, body["code"]) == (200, "0"), body
    payout = Payout.objects.select_related("hold").get(mch_order_no=mch_order_no)
    assert payout.hold.amount == payout.amount + payout.fee
    return payout


def money_rows() -> tuple:
    """Payouts, holds and postings counted, and every account's balance: equal before and after means no money
    row was written."""
    return (Payout.objects.count(), Hold.objects.count(), Posting.objects.count(),
            dict(LedgerAccount.objects.values_list("pk", "balance")))


def pay_through_page(pay_url: str, timeout: float = 30) -> requests.Response:
    """The payer presses the sandbox `Pay` button on the hosted page (docs/api.md, "Sandbox channel"): the upstream's
    code path."""
    with requests.Session() as session:
        page = session.get(pay_url, timeout=timeout)
        assert page.status_code == 200, page.status_code
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        return session.post(pay_url, data={"csrfmiddlewaretoken": token, "action": "pay"}, allow_redirects=False,
                            timeout=timeout)


def assert_clean_error_envelope(status: int, body: dict, code: str, http_status: int) -> None:
    """docs/api.md, "Error codes": the envelope, that code and status, data null, and nothing internal in the
    message."""
    assert (status, body.get("code")) == (http_status, code), body
    assert set(body) == {"code", "msg", "data"} and body["data"] is None, body
    leaked = re.compile(r"Traceback|File \"|psycopg|OperationalError|ConnectionError|redis|SELECT|INSERT", re.I)
    assert not leaked.search(body["msg"]), body


def elapsed_since(start: float) -> float:
    return round(time.monotonic() - start, 2)


def timed(call):
    """`call()`'s result and the seconds it took."""
    start = time.monotonic()
    return call(), elapsed_since(start)


def pay_timed(order: dict, paid: set[str]) -> float:
    """Pay a created order on its hosted page (answered with the 302 to the return page), add it to `paid`, and
    return the seconds the payment took."""
    response, seconds = timed(lambda: pay_through_page(order["pay_url"]))
    assert response.status_code == 302, response.status_code
    paid.add(order["platform_order_no"])
    return seconds
