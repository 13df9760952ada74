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
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.conf import settings

from tests.support.receiver import CallbackReceiver
from tests.support.wait import wait_until

pytestmark = pytest.mark.xdist_group("default-stack")  # the module's tests share one copy, in order

ROOT = Path(settings.BASE_DIR)
BURST_SECONDS = 60
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
SETTLED_PAY_IN = {"SUCCESS", "EXPIRED"}
SETTLED_PAYOUT = {"SUCCESS", "FAILED"}
STOPPED = re.compile(r"^make run: stopped on (.+?): every process and the embedded servers", re.M)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def checkout():
    """This checkout's files without .venv, var/ and git: what a fresh clone holds. Outside pytest's tmp tree and
    readable by all: as root the embedded PostgreSQL runs as the wheel's system user, which must reach var/."""
    top = Path(tempfile.mkdtemp(prefix="default-stack-"))
    top.chmod(0o755)
    copy = top / "checkout"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(
        ".venv", "var", ".git", "__pycache__", ".pytest_cache", ".hypothesis", "control", "*.pem", "node_modules"))
    copy.chmod(0o755)
    yield copy
    shutil.rmtree(top, ignore_errors=True)


def _environment() -> dict:
    """A newcomer's shell: none of the suite's variables. The copy runs on this suite's .venv (the same lock) and
    `uv run` leaves it as it is (the SDK's editable install points at this checkout, not the copy)."""
    drop = {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE", "API_ROOT", "PORT",
            "EMBEDDED_PGDATA", "EMBEDDED_VALKEY_DIR", "PROMETHEUS_MULTIPROC_DIR", "VIRTUAL_ENV"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("PYTEST", "XDIST"))}
    env.update(UV_PROJECT_ENVIRONMENT=sys.prefix, UV_NO_SYNC="1", PYTHONUNBUFFERED="1")
    return env


class MakeRun:
    """`make run PORT=<free>` in the copy, in a session of its own; on a terminal of its own (a pty) when tty."""

    def __init__(self, checkout: Path, *, tty: bool):
        self.checkout, self.port = checkout, _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = checkout.parent / f"make-run-{self.port}.log"
        self.terminal = None
        # -o install-run: .venv is the suite's, installed (UV_NO_SYNC keeps every `uv run` from syncing it).
        command = ["make", "--no-print-directory", "-o", "install-run", "run", f"PORT={self.port}"]
        if tty:
            self.terminal, slave = os.openpty()
            # The new session's controlling terminal is the pty, as a shell's in a terminal window; its foreground
            # group is make's, so a ^C typed there is a Ctrl-C.
            become = "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); os.execvp('make', sys.argv[1:])"
            self.proc = subprocess.Popen([sys.executable, "-c", become, *command], cwd=checkout, env=_environment(),
                                         stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
            os.close(slave)
            threading.Thread(target=self._copy_the_terminal, daemon=True).start()
        else:
            with self.log.open("ab") as out:
                self.proc = subprocess.Popen(command, cwd=checkout, env=_environment(), stdin=subprocess.DEVNULL,
                                             stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def _copy_the_terminal(self) -> None:
        with self.log.open("ab") as out:
            while True:
                try:
                    chunk = os.read(self.terminal, 65536)
                except OSError:
                    return  # the last process holding the terminal is gone
                if not chunk:
                    return
                out.write(chunk)
                out.flush()

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_ready(self, timeout: float) -> None:
        def ready():
            assert self.proc.poll() is None, f"make run exited {self.proc.returncode}:\n{self.text()[-4000:]}"
            text = self.text()
            if not ("celery@" in text and " ready." in text and "beat" in text):
                return False
            try:
                return requests.get(f"{self.base}/currencies", timeout=3).status_code == 200
            except requests.RequestException:
                return False

        wait_until(ready, timeout=timeout, interval=0.5, what="make run's web to answer and its worker to be ready")

    def everything(self) -> list[psutil.Process]:
        """make, what it started, and the embedded servers (pg_ctl starts PostgreSQL outside make's tree)."""
        processes = [psutil.Process(self.proc.pid)]
        with contextlib.suppress(psutil.NoSuchProcess):
            processes += psutil.Process(self.proc.pid).children(recursive=True)
        with contextlib.suppress(OSError, ValueError, psutil.NoSuchProcess):
            postmaster = int((self.checkout / "var/postgres/postmaster.pid").read_text().split()[0])
            processes.append(psutil.Process(postmaster))
        return processes

    def manage(self, *args: str, stdin: str | None = None) -> dict:
        """`uv run python manage.py ...` in a second terminal of the copy: nothing set."""
        result = subprocess.run(["uv", "run", "python", "manage.py", *args], cwd=self.checkout, env=_environment(),
                                input=stdin, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-3000:]
        return json.loads(result.stdout)

    def stop_leftovers(self) -> None:
        """After a failure: whatever of this run still runs."""
        for process in self.everything() if self.proc.poll() is None else []:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        with contextlib.suppress(OSError, ValueError, psutil.NoSuchProcess):
            psutil.Process(int((self.checkout / "var/valkey/valkey.pid").read_text().split()[0])).kill()
        with contextlib.suppress(OSError, ValueError, psutil.NoSuchProcess):
            postmaster = int((self.checkout / "var/postgres/postmaster.pid").read_text().split()[0])
            psutil.Process(postmaster).send_signal(signal.SIGQUIT)
        if self.terminal is not None:
            with contextlib.suppress(OSError):
                os.close(self.terminal)


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
    def __init__(self, run: MakeRun, receiver: CallbackReceiver, index: int):
        from payments_merchant.client import PaymentsClient

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = run.checkout.parent / f"merchant-{index}.pub"
        public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo))
        created = run.manage("create_merchant", "--name", f"Burst {index}", "--public-key", str(public),
                             "--collection-callback-url", f"{receiver.url}/{index}/collection",
                             "--payout-callback-url", f"{receiver.url}/{index}/payout")
        self.merchant_no = created["merchant_no"]
        run.manage("adjust_balance", self.merchant_no, "PHP", str(10 ** 12), "--reason", "burst float")
        self.client = PaymentsClient(api_root=run.base, merchant_no=created["merchant_no"],
                                     app_id=created["app_id"], private_key=key, timeout=30)
        self.pay_ins: list[str] = []
        self.payouts: list[str] = []


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


def _statuses(merchant: Merchant) -> tuple[dict, dict]:
    pay_ins = {no: merchant.client.pay_query(mch_order_no=no) for no in merchant.pay_ins}
    payouts = {no: merchant.client.payout_query(mch_order_no=no) for no in merchant.payouts}
    return pay_ins, payouts


def test_default_stack_takes_a_burst_of_pay_ins_payouts_and_callbacks_then_stops_on_ctrl_c(checkout):
    receiver = CallbackReceiver(keep_alive=True).start()
    run = MakeRun(checkout, tty=True)
    try:
        # A fresh clone's first start: initdb, the whole migration history, bootstrap (about a minute on 2 busy
        # cores). A bound on start-up, not a contract.
        run.wait_ready(timeout=300)
        assert run.manage("verify_ledger")["ok"]  # the second terminal reaches the same database, nothing set
        merchants = [Merchant(run, receiver, index) for index in range(3)]
        errors: list[str] = []
        started = time.monotonic()
        clients = [threading.Thread(target=_client_loop, args=(run, merchant, started + BURST_SECONDS, seed, errors))
                   for seed, merchant in enumerate(merchants * 2)]  # two clients per merchant
        for client in clients:
            client.start()
        for client in clients:
            client.join(timeout=BURST_SECONDS + 120)
        assert not errors, errors[:5]

        def all_settled():
            return all(all(q.status in SETTLED_PAY_IN for q in pay_ins.values())
                       and all(q.status in SETTLED_PAYOUT for q in payouts.values())
                       for pay_ins, payouts in map(_statuses, merchants))

        wait_until(all_settled, timeout=120, interval=2, what="every pay-in and payout to be terminal")
        expected = {}
        for index, merchant in enumerate(merchants):
            pay_ins, payouts = _statuses(merchant)
            expected.update({q.platform_order_no: f"/callback/{index}/collection" for q in pay_ins.values()
                             if q.status == "SUCCESS"})
            expected.update({q.platform_order_no: f"/callback/{index}/payout" for q in payouts.values()})
        wait_until(lambda: {r.body["platform_order_no"] for r in receiver.requests} >= set(expected), timeout=90,
                   interval=1, what="a callback for every successful pay-in and every settled payout")
        time.sleep(3)  # a duplicate would come now
        delivered = [(r.body["platform_order_no"], r.path) for r in receiver.requests]
        ledger = run.manage("verify_ledger")
        before = run.everything()
        stop_started = time.monotonic()
        os.write(run.terminal, b"\x03")  # Ctrl-C typed in make run's terminal
        code = run.proc.wait(timeout=60)
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
    print(f"burst: {orders} orders, {len(delivered)} callbacks in {BURST_SECONDS} s; stopped in {stop_seconds:.1f} s")


def _start_again(checkout) -> MakeRun:
    run = MakeRun(checkout, tty=False)
    try:
        run.wait_ready(timeout=180)
    except BaseException:
        run.stop_leftovers()
        raise
    return run


def _merchants_named(run: MakeRun, name: str) -> int:
    result = subprocess.run(["uv", "run", "python", "manage.py", "shell", "-c",
                             f"from apps.merchants.models import Merchant; "
                             f"print(Merchant.objects.filter(name={name!r}).count())"],
                            cwd=run.checkout, env=_environment(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return int(result.stdout.split()[-1])


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
            code = run.proc.wait(timeout=60)
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
        code = run.proc.wait(timeout=60)
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
