"""`make run`'s own default stack, as a newcomer runs it on a fresh clone: no DATABASE_URL, no REDIS_URL, so the
embedded PostgreSQL and Valkey, in a copy of this checkout with a var/ of its own, on a free port
(docs/development.md, "What make run does").

One copy serves the module's tests in order: the burst (several merchants' clients creating pay-ins and payouts for
a minute, payers pressing Pay, a real local callback receiver) ended by a Ctrl-C on a real terminal; then a second
start that finds the first one's data, each other way to stop it, and a process that dies."""

import contextlib
import json
import os
import re
import shutil
import signal
import threading
import time
import uuid
from urllib.parse import urlsplit

import psutil
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from payments_merchant.errors import RateLimitedError

from tests.support.make_run import MakeRun, copy_checkout
from tests.support.receiver import CallbackReceiver
from tests.support.wait import wait_until

pytestmark = pytest.mark.xdist_group("default-stack")  # the module's tests share one copy, in order

BURST_SECONDS = 60
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
SETTLED_PAY_IN = {"SUCCESS", "EXPIRED"}
SETTLED_PAYOUT = {"SUCCESS", "FAILED"}
STOPPED = re.compile(r"^make run: stopped on (.+?): every process and the embedded servers", re.M)


@pytest.fixture(scope="module")
def checkout():
    """A fresh clone's files, with no var/: the first start initialises it."""
    copy = copy_checkout()
    yield copy
    shutil.rmtree(copy.parent, ignore_errors=True)


def _all_gone(processes: list[psutil.Process]) -> bool:
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            if process.status() != psutil.STATUS_ZOMBIE:
                return False
    return True


def _assert_stopped_cleanly(run: MakeRun, before: list[psutil.Process], *, within: float) -> str:
    wait_until(lambda: _all_gone(before), timeout=within, interval=0.1,
               what="make, its processes and the embedded servers to be gone")
    assert not (run.checkout / "var/postgres/postmaster.pid").exists()
    assert not (run.checkout / "var/valkey/valkey.pid").exists()
    text = run.text()
    assert len(STOPPED.findall(text)) == 1, text[-3000:]
    assert "Traceback" not in text, text[-5000:]
    assert "sending SIGKILL" not in text, text[-3000:]  # every process stopped within honcho's grace
    return STOPPED.search(text).group(1)


# --- the merchants' side ----------------------------------------------------------------------------------------

class Merchant:
    def __init__(self, run: MakeRun, key, created: dict):
        from payments_merchant.client import PaymentsClient

        self.merchant_no = created["merchant_no"]
        self.client = PaymentsClient(api_root=run.base, merchant_no=created["merchant_no"],
                                     app_id=created["app_id"], private_key=key, timeout=30)
        self.pay_ins: list[str] = []
        self.payouts: list[str] = []


CREATE_MERCHANTS = """
import json
from apps.ledger.services import balance_adjust
from apps.merchants.services import merchant_create
created = []
for name, pem, collection_url, payout_url in {rows!r}:
    made = merchant_create(name=name, public_key_pem=pem, currencies=["PHP"], collection_callback_url=collection_url,
                           payout_callback_url=payout_url)
    balance_adjust(merchant_no=made.merchant.merchant_no, currency="PHP", amount=10 ** 12, reason="burst float")
    created.append({{"merchant_no": made.merchant.merchant_no, "app_id": made.app.app_id}})
print(json.dumps(created))
"""


def _merchants(run: MakeRun, receiver: CallbackReceiver, count: int) -> list[Merchant]:
    """Merchants with a float and callback URLs on the receiver, made in one `manage.py shell` of the second
    terminal (one Django start-up instead of two commands per merchant)."""
    keys = [rsa.generate_private_key(public_exponent=65537, key_size=2048) for _ in range(count)]
    rows = [(f"Burst {i}", key.public_key().public_bytes(serialization.Encoding.PEM,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo).decode(),
             f"{receiver.url}/{i}/collection", f"{receiver.url}/{i}/payout") for i, key in enumerate(keys)]
    created = run.shell(CREATE_MERCHANTS.format(rows=rows))
    return [Merchant(run, key, made) for key, made in zip(keys, json.loads(created.splitlines()[-1]), strict=True)]


def _press(run: MakeRun, pay_url: str, action: str) -> None:
    """A payer on the hosted page (the sandbox's): open it, press Pay."""
    url = run.base + urlsplit(pay_url).path
    with requests.Session() as session:
        page = session.get(url, timeout=30)
        assert page.status_code == 200, page.status_code
        token = CSRF.search(page.text).group(1)
        answer = session.post(url, data={"csrfmiddlewaretoken": token, "action": action}, allow_redirects=False,
                              timeout=30)
        assert answer.status_code in (200, 302), answer.status_code


def _client_loop(run: MakeRun, merchant: Merchant, deadline: float, seed: int, errors: list) -> None:
    import random

    rng = random.Random(seed)
    try:
        while time.monotonic() < deadline:
            order = merchant.client.pay_create(mch_order_no=f"in-{uuid.uuid4().hex[:20]}",
                                               product_code=rng.choice(["PHP_COLLECT_D0", "PHP_COLLECT_D1"]),
                                               amount=rng.randint(100, 2_000_000), currency="PHP", subject="burst")
            merchant.pay_ins.append(order.mch_order_no)
            _press(run, order.pay_url, "pay")
            # Under review's threshold: the sandbox bank settles these by itself; accounts ending 4000 fail there.
            payout = merchant.client.payout_create(
                mch_order_no=f"out-{uuid.uuid4().hex[:20]}", product_code="PHP_PAYOUT",
                amount=rng.randint(100, 400_000), currency="PHP", payee_name="Burst Payee",
                payee_account=f"{rng.randint(10, 99)}{rng.randint(0, 9999):04d}"
                              f"{'4000' if rng.random() < 0.15 else f'{rng.randint(5000, 9999)}'}",
                bank_code=rng.choice(["BDO", "BPI", "GCASH"]))
            merchant.payouts.append(payout.mch_order_no)
    except Exception as exc:  # noqa: BLE001 - the test fails on it below, with the client's error
        errors.append(f"{merchant.merchant_no}: {type(exc).__name__}: {exc}")


class Settled:
    """What each order ended as, asked of the API (pay/query, payout/query) until it is terminal; an order once
    terminal is not asked again."""

    def __init__(self, merchants: list[Merchant]):
        self.merchants = merchants
        self.pay_ins: dict[str, tuple[int, object]] = {}  # mch_order_no -> (merchant index, query result)
        self.payouts: dict[str, tuple[int, object]] = {}

    def all_terminal(self) -> bool:
        from concurrent.futures import ThreadPoolExecutor

        asks = [(index, kind, number) for index, merchant in enumerate(self.merchants)
                for kind, numbers, known in (("pay-in", merchant.pay_ins, self.pay_ins),
                                             ("payout", merchant.payouts, self.payouts))
                for number in numbers if number not in known]

        def ask(index: int, kind: str, number: str) -> None:
            try:
                ask_once(index, kind, number)
            except RateLimitedError:  # 1106 is the rate limit doing its job: asked again on the next round
                pass

        def ask_once(index: int, kind: str, number: str) -> None:
            client = self.merchants[index].client
            if kind == "pay-in":
                result = client.pay_query(mch_order_no=number)
                if result.status in SETTLED_PAY_IN:
                    self.pay_ins[number] = (index, result)
            else:
                result = client.payout_query(mch_order_no=number)
                if result.status in SETTLED_PAYOUT:
                    self.payouts[number] = (index, result)

        with ThreadPoolExecutor(max_workers=6) as pool:  # as many as the burst's clients
            list(pool.map(lambda a: ask(*a), asks))
        return len(self.pay_ins) + len(self.payouts) == sum(len(m.pay_ins) + len(m.payouts) for m in self.merchants)

    def callbacks_expected(self) -> dict[str, str]:
        """platform_order_no -> the receiver's path: one per successful pay-in and one per settled payout."""
        expected = {r.platform_order_no: f"/callback/{i}/collection" for i, r in self.pay_ins.values()
                    if r.status == "SUCCESS"}
        expected.update({r.platform_order_no: f"/callback/{i}/payout" for i, r in self.payouts.values()})
        return expected


def test_default_stack_takes_a_burst_of_pay_ins_payouts_and_callbacks_then_stops_on_ctrl_c(checkout):
    receiver = CallbackReceiver(keep_alive=True).start()
    run = MakeRun(checkout, tty=True)
    try:
        # A fresh clone's first start: initdb, the whole migration history, bootstrap (about a minute on 2 busy
        # cores). A bound on start-up, not a contract.
        run.wait_ready(timeout=300)
        # A second terminal reaches the same database and the keys bootstrap made, nothing set.
        assert run.manage("verify_ledger")["ok"]
        assert [key["key_version"] for key in run.manage("platform_keys")["keys"]] == [1]
        merchants = _merchants(run, receiver, 3)
        errors: list[str] = []
        started = time.monotonic()
        clients = [threading.Thread(target=_client_loop, args=(run, merchant, started + BURST_SECONDS, seed, errors))
                   for seed, merchant in enumerate(merchants * 2)]  # two clients per merchant
        for client in clients:
            client.start()
        for client in clients:
            client.join(timeout=BURST_SECONDS + 120)
        assert not errors, errors[:5]

        load_ended = time.time()
        settled = Settled(merchants)
        wait_until(settled.all_terminal, timeout=180, interval=2, what="every pay-in and payout to be terminal")
        expected = settled.callbacks_expected()
        wait_until(lambda: {r.body["platform_order_no"] for r in receiver.requests} >= set(expected), timeout=90,
                   interval=1, what="a callback for every successful pay-in and every settled payout")
        time.sleep(3)  # a duplicate would come now
        delivered = [(r.body["platform_order_no"], r.path) for r in receiver.requests]
        last_callback_after = max(r.at for r in receiver.requests) - load_ended
        ledger = run.manage("verify_ledger")
        before = run.everything()
        stop_started = time.monotonic()
        os.write(run.terminal, b"\x03")  # Ctrl-C typed in make run's terminal
        code = run.wait_exit(timeout=60)
        reason = _assert_stopped_cleanly(run, before, within=30)
        stop_seconds = time.monotonic() - stop_started
    finally:
        run.stop_leftovers()
        receiver.stop()
    orders = sum(len(m.pay_ins) + len(m.payouts) for m in merchants)
    assert orders >= 60, f"only {orders} orders in {BURST_SECONDS} s"
    assert sorted(delivered) == sorted(expected.items()), "each callback delivered exactly once, to its URL"
    assert ledger["ok"], ledger["failures"]
    assert code == 0, run.text()[-3000:]
    assert reason == "SIGINT (Ctrl-C)"
    assert "Interrupt" not in run.text() and "Error 130" not in run.text()  # make saw its recipe succeed
    assert stop_seconds < 20, stop_seconds
    print(f"burst: {orders} orders and {len(delivered)} callbacks from {len(clients)} clients in {BURST_SECONDS} s; "
          f"the last callback {last_callback_after:.1f} s after the load; "
          f"Ctrl-C stopped everything in {stop_seconds:.1f} s")


def _start_again(checkout) -> MakeRun:
    run = MakeRun(checkout, tty=False)
    try:
        run.wait_ready(timeout=180)
    except BaseException:
        run.stop_leftovers()
        raise
    return run


def _merchants_named(run: MakeRun, name: str) -> int:
    return int(run.shell(f"from apps.merchants.models import Merchant; "
                         f"print(Merchant.objects.filter(name={name!r}).count())").split()[-1])


def test_sigterm_or_sigint_to_make_stops_everything_and_the_next_start_finds_its_data(checkout, tmp_path):
    """GNU make itself dies of the signal it was sent, once its recipe has ended (status 128 + the signal, and its
    own `make: *** [run] Terminated` line): under it, the stop is clean and says so."""
    public = tmp_path / "kept.pub"
    public.write_bytes(rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    outcomes = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        run = _start_again(checkout)
        try:
            if signum == signal.SIGTERM:
                run.manage("create_merchant", "--name", "Kept across a stop", "--public-key", str(public))
            kept = _merchants_named(run, "Kept across a stop")
            before = run.everything()
            started = time.monotonic()
            os.kill(run.proc.pid, signum)  # to make alone, as `kill -TERM <pid>` / `kill -INT <pid>`
            code = run.wait_exit(timeout=60)
            reason = _assert_stopped_cleanly(run, before, within=30)
            outcomes.append((signum, kept, code, reason, time.monotonic() - started))
        finally:
            run.stop_leftovers()
    (_, kept_first, term_code, term_reason, term_seconds), (_, kept_again, int_code, int_reason, int_seconds) = outcomes
    assert (kept_first, kept_again) == (1, 1)  # the second start found what the first wrote
    assert (term_reason, term_code) == ("SIGTERM", -signal.SIGTERM)
    assert (int_reason, int_code) == ("SIGINT (Ctrl-C)", -signal.SIGINT)
    assert term_seconds < 20 and int_seconds < 20, (term_seconds, int_seconds)


def test_a_process_that_dies_stops_every_other_and_says_which(checkout):
    run = _start_again(checkout)
    try:
        worker = next(p for p in psutil.Process(run.proc.pid).children(recursive=True)
                      if p.name() not in ("uv", "sh", "dash", "bash") and "worker" in p.cmdline()
                      and any(part.endswith("celery") for part in p.cmdline()))
        before = run.everything()
        worker.kill()  # SIGKILL: the out-of-memory killer, a crash
        code = run.wait_exit(timeout=60)
        wait_until(lambda: _all_gone(before), timeout=30, interval=0.1, what="everything to stop")
    finally:
        run.stop_leftovers()
    text = run.text()
    assert re.search(r"make run: worker\.1 ended by itself \(status -?\d+; .*\), so web\.1, beat\.1 were stopped with "
                     r"it\.", text), text[-3000:]
    assert "make run: stopped because" in text and "`make run` starts it again." in text
    assert code == 2, text[-2000:]  # make: its recipe failed
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{run.base}/currencies", timeout=3)  # no web left serving pages whose tasks nothing runs
    assert not (checkout / "var/postgres/postmaster.pid").exists()
    assert not (checkout / "var/valkey/valkey.pid").exists()
