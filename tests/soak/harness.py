"""The standing whole-platform soak (docs/faults.md, "The soak").

    uv run python -m tests.soak.harness --seconds 90 [--seed N]      # make soak SOAK_SECONDS=600 SOAK_SEED=N

In the spirit of Jepsen's bank test and TigerBeetle's simulator: the real stack (gunicorn with several workers, a
Celery worker and beat, PostgreSQL, a private redis-server) serves many concurrent actors for a chosen time while
faults are injected on a schedule; every request and its answer is kept client-side; after a quiet period (faults
off, workers and beat left to finish) the database, the ledger and what the merchants' callback receivers got are
compared with that history, and ONE JSON object is printed on stdout. Exit status 1 when any check fails.

Actors (threads; each with its own random.Random derived from the seed, so its choices are reproducible, the
interleaving is not):
  merchant-*   signed pay/create and payout/create over HTTP: new orders, identical replays, conflicting replays
               (same mch_order_no, another amount: must be 2001), retries after a client timeout
  racer        the replay race: a payout in review, replayed from several threads while an admin reviewer, the
               CLI and a service decide it at the same moment; an approved one replayed while the sandbox settles it
  payer-*      press Pay (and sometimes Fail) on one hosted page from several threads at once (live: open the page,
               forwarded to the invoice or checkout session, from several threads)
  reviewer-*   approve / reject / second approvals: the admin over HTTP (staff signed in with password + TOTP),
               `manage.py review_payout` subprocesses, and the payout services in this process
  ops-*        reversals (admin staff request + a second person's approval, or `reverse_payout`); one
               `rotate_platform_key`, `reconcile_channels`, `release_settlement --as-of <tomorrow>`
  upstreams    (live) Xendit's and PayMongo's sides on their emulators: tests/soak/upstream.py
  insider      (sandbox) one person trying to sit in two seats through the admin and the portal, each try refused:
               tests/soak/insider.py
  refunds      paid pay-ins refunded in parts over refund/create (replays, conflicting replays, refunds beyond
               what was paid, amounts the sandbox fails) while the portal refunds the same order through its pages
               (a finance person asks, an owner approves with a fresh code): tests/soak/refunds.py
  faults       SIGKILL a gunicorn worker, SIGKILL the Celery worker (and start a new one), pg_terminate_backend of
               the platform's database sessions, SIGSTOP/SIGCONT of the private redis-server
  hosts        (--hosts N, N >= 2) whole hosts SIGKILLed in turn and started again: tests/support/hosts.py

Everything runs on 127.0.0.1; every loop is bounded in count and time; every process started is ended at exit
(also on SIGTERM / Ctrl-C).

A deployment is sandbox or live, never both (docs/channels.md), so each runs in a child process of its own, side
by side (`--in-turn`: one after the other), on its own database and redis-server: the sandbox (hosted page's Pay button, the sandbox bank)
and live (Xendit and PayMongo, played by tests/soak/upstream.py on their emulators: invoices and checkout sessions
paid, disbursements settled, refunds decided, webhooks duplicated, late, out of order and lost). The load time is
shared 2:1.

`--hosts N` (N >= 2): each deployment's platform runs as N hosts on their own loopback addresses (each its gunicorn,
Celery worker and beat) behind HAProxy, reaching the database through PgBouncer; every actor goes through the proxy.
"""

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import requests

from bench.run import drop_and_create

ROOT = Path(__file__).resolve().parents[2]
HARNESS_APP = "soak-harness"  # application_name of this process's own database sessions (never terminated)

REVIEW_MIN = 5_000_000  # PHP minor units: the default review threshold (50,000 PHP)
DUAL_AMOUNT = 20_000_000  # the default two-approval threshold (200,000 PHP; the payout product's maximum is 500,000)
TOP_UP = 10 ** 12
PASSWORD = "Lantern-Quartz-917"
TERMINAL_PAYOUT = ("SUCCESS", "FAILED", "REJECTED")
DEPLOYMENTS = ("sandbox", "live")
SHARE = {"sandbox": 2, "live": 1}  # of the load time, when both run
INSIDER_MERCHANT = "Soak insider merchant"  # tests/soak/insider.py: its payouts wait for the insider's accomplices
WAITING_PAYOUT = ("FROZEN",)  # awaiting a reviewer: legitimately waiting (docs/faults.md)


# ----------------------------------------------------------------------------------------------------- options

@dataclass
class Options:
    stack: str
    seconds: float
    seed: int
    quiet_seconds: float
    web_workers: int
    worker_concurrency: int
    worker_pool: str
    merchants: int
    payers: int
    fault_every: float
    faults: bool
    postgres: str
    database: str
    template: str | None
    logdir: Path | None
    deployments: str
    in_turn: bool
    deployment: str | None
    broker: str = "redis"
    hosts: int = 1
    host_kill_every: float = 8.0


def parse_args(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    env = os.environ.get
    parser.add_argument("--seconds", type=float, default=float(env("SOAK_SECONDS") or 90))
    parser.add_argument("--seed", type=int, default=int(env("SOAK_SEED") or 0) or None,
                        help="default: random (printed)")
    parser.add_argument("--quiet-seconds", type=float, default=float(env("SOAK_QUIET_SECONDS") or 150),
                        help="longest wait after the load for workers and beat to finish")
    parser.add_argument("--web-workers", type=int, default=int(env("SOAK_WEB_WORKERS") or 3))
    parser.add_argument("--worker-concurrency", type=int, default=int(env("SOAK_WORKER_CONCURRENCY") or 2))
    parser.add_argument("--worker-pool", default=env("SOAK_WORKER_POOL") or "threads", choices=["threads", "prefork"])
    parser.add_argument("--merchants", type=int, default=int(env("SOAK_MERCHANTS") or 3))
    parser.add_argument("--payers", type=int, default=int(env("SOAK_PAYERS") or 2))
    parser.add_argument("--fault-every", type=float, default=float(env("SOAK_FAULT_EVERY") or 15),
                        help="mean seconds between two faults")
    parser.add_argument("--no-faults", dest="faults", action="store_false")
    parser.add_argument("--postgres", default=env("SOAK_POSTGRES") or "postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default=env("SOAK_DATABASE") or _default_database(),
                        help="recreated at the start (default: <DATABASE_URL's name>_soak)")
    parser.add_argument("--template", default=env("SOAK_TEMPLATE_DATABASE") or None,
                        help="copy this migrated database (nobody connected to it) instead of migrating an empty one; "
                             "make test's soak copies the suite's migrated template")
    parser.add_argument("--logdir", type=Path, default=None, help="keep the processes' logs here")
    parser.add_argument("--deployments", default=env("SOAK_DEPLOYMENTS") or "sandbox,live",
                        help="run side by side; the load time is shared: sandbox 2/3, live 1/3")
    parser.add_argument("--in-turn", action="store_true", default=bool(env("SOAK_IN_TURN")),
                        help="run the deployments one after the other instead of side by side")
    parser.add_argument("--stack", choices=["own", "make-run"], default=env("SOAK_STACK") or "own",
                        help="own: gunicorn, Celery and a private redis-server on PostgreSQL (with faults); make-run: "
                             "`make run`'s default stack in a copy of the checkout (embedded PostgreSQL and Valkey), "
                             "the sandbox deployment, no faults (docs/development.md)")
    parser.add_argument("--broker", choices=["redis", "rabbitmq"], default=env("SOAK_BROKER") or "redis",
                        help="the Celery broker of the own stack: its private redis-server, or a vhost of its own on "
                             "the machine's RabbitMQ (production's broker; Redis stays the cache and the nonces)")
    parser.add_argument("--hosts", type=int, default=int(env("SOAK_HOSTS") or 1),
                        help="the own stack as this many hosts behind HAProxy and PgBouncer (each its gunicorn, "
                             "Celery worker and beat), whole hosts killed in turn and started again; 1: one host")
    parser.add_argument("--host-kill-every", type=float, default=float(env("SOAK_HOST_KILL_EVERY") or 8),
                        help="with --hosts: mean seconds from a host back in the proxy's rotation to the next kill")
    parser.add_argument("--deployment", choices=DEPLOYMENTS, default=None, help=argparse.SUPPRESS)  # a child's
    args = parser.parse_args(argv)
    if args.stack == "make-run":
        # make run serves one deployment, the sandbox; and one of its processes killed stops it by design, so the
        # faults (which kill workers and freeze Redis) have nothing to test there.
        args.deployments, args.faults, args.hosts = "sandbox", False, 1
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 10 ** 9)
    return Options(**vars(args))


def _default_database() -> str:
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/payments")
    return (urlsplit(url).path.lstrip("/") or "payments") + "_soak"


# ----------------------------------------------------------------------------------------------------- history

@dataclass
class Op:
    """One request of one actor and what it was told (Jepsen's :ok / :fail / :info)."""

    actor: str
    kind: str  # pay/create, payout/create, pay/press, admin/decide, cli/review_payout, service/approve, ...
    key: str  # mch_order_no or platform_order_no the request is about
    params: dict
    started: float
    ended: float = 0.0
    http_status: int | None = None
    code: str | None = None  # the envelope's code, or the CLI's exit status as a string
    outcome: str = "info"  # ok (took effect), fail (refused), info (unknown: timeout, reset, excused error)
    data: dict | None = None
    detail: str = ""


# A process serving requests SIGKILLed: a whole host (--hosts), or one gunicorn worker.
SERVING_KILLS = ("kill_host", "kill_web_worker")
# What a request gets when the connection under it is cut (requests' exception names, as Op.detail records them).
CONNECTION_CUT = ("ConnectionError", "ChunkedEncodingError")


class History:
    def __init__(self, t0: float = 0.0, *, behind_proxy: bool = False, upstream_timeout: float | None = None):
        self.t0 = t0  # the start of the load: times in the JSON are seconds since then
        # The live deployment's CHANNEL_HTTP_TIMEOUT_SECONDS: how long the platform waits for an emulator's API.
        self.upstream_timeout = upstream_timeout
        self.wall0 = time.time() - (time.monotonic() - t0)  # t0 on the clock of the processes' log lines
        # Behind the proxy a cut connection is an error too: the actors' connections end at HAProxy, which never dies.
        self.behind_proxy = behind_proxy
        self.ops: list[Op] = []
        self.faults: list[dict] = []
        self.lock = threading.Lock()

    def add(self, op: Op) -> Op:
        with self.lock:
            self.ops.append(op)
        return op

    def sample(self, op: Op) -> dict:
        """An op as the JSON shows it."""
        return {"actor": op.actor, "kind": op.kind, "key": op.key, "http": op.http_status, "code": op.code,
                "at": round(op.started - self.t0, 1), "detail": op.detail[:300]}

    def fault(self, kind: str, started: float, ended: float, **detail) -> dict:
        """Record a fault (its times in seconds since t0); the dict is returned, for details known later."""
        fault = {"kind": kind, "started": started, "ended": ended, **detail}
        with self.lock:
            self.faults.append(fault)
        return fault

    def failed(self, op: Op) -> bool:
        """An answer no actor may see unexcused: a 5xx, a 9999, a CLI traceback or a service exception; behind the
        proxy also a cut connection. A client timeout never is (Jepsen's info: it may or may not have taken effect)."""
        return ((op.http_status or 0) >= 500 or op.code == "9999" or op.outcome == "error"
                or self.behind_proxy and op.detail in CONNECTION_CUT)

    def in_flight(self, op: Op, fault: dict) -> bool:
        """Whether `op` was in flight at the fault: started before it ended (a host is dead once its last process is
        reaped) and answered after it began (the first SIGKILL)."""
        return op.started - self.t0 <= fault["ended"] and op.ended - self.t0 >= fault["started"]

    def excused(self, op: Op) -> str | None:
        """The fault that may explain an error answer:
        - a database backend terminated or Redis stalled while the request was in flight (the platform then answers
          9999 by design: docs/faults.md, drills 2, 3 and 5), up to 2 s (3 s) after it;
        - a host or a gunicorn worker SIGKILLed while the request was in flight, and the answer is the one a request
          whose server died gets: the proxy's 502, or the connection cut (nothing after the kill is excused: the
          proxy sends a request whose connection a dead host refused to another one);
        - an upstream's webhook answered 503 "upstream unavailable" after the platform had waited its whole timeout
          for the emulator's API (the emulators answer from the harness's process, which a loaded machine can stall
          that long): the documented answer, the upstream retries and reconciliation settles the order."""
        if (self.upstream_timeout is not None and op.actor == "upstreams" and op.http_status == 503
                and "upstream unavailable" in op.detail and op.ended - op.started >= self.upstream_timeout):
            return "upstream_timeout"
        with self.lock:
            for fault in self.faults:
                if fault["kind"] in SERVING_KILLS:
                    if (op.http_status == 502 or op.detail in CONNECTION_CUT) and self.in_flight(op, fault):
                        return fault["kind"]
                    continue
                grace = {"terminate_backends": 2.0, "stall_redis": 3.0}.get(fault["kind"])
                start, end = op.started - self.t0, op.ended - self.t0
                if grace is not None and start <= fault["ended"] + grace and end >= fault["started"] - 0.5:
                    return fault["kind"]
        return None

    def kills(self) -> list[dict]:
        """Each whole host killed: when, for how long it was out of the proxy's rotation, the operations in flight at
        the kill and how many of them were lost with it (answered 502 or cut: excused)."""
        report = []
        for fault in [f for f in self.faults if f["kind"] == "kill_host"]:
            in_flight = [op for op in self.ops if self.in_flight(op, fault)]
            lost = [op for op in in_flight if self.failed(op) and self.excused(op) == "kill_host"]
            report.append({"host": fault["host"], "at": round(fault["started"], 2),
                           "back_in_rotation_after": fault.get("back_in_rotation_after"),
                           "in_flight": len(in_flight), "lost": len(lost)})
        return report


# ------------------------------------------------------------------------------------------ callback receivers

def callback_url(receiver, merchant_index: int, kind: str) -> str:
    """A merchant's callback URL on the receiver (tests/support/receiver.py: a real HTTP server that answers
    `success` and records every request)."""
    return f"http://127.0.0.1:{receiver.server.server_address[1]}/m{merchant_index}/{kind}"


def callbacks_received(receiver) -> list[dict]:
    """Every callback the merchants' receiver got, each verified as a merchant would (the SDK's verify_callback with
    the platform public key of its key_version, as `platform_keys` publishes them, old versions kept)."""
    from payments_merchant.callbacks import verify_callback

    from apps.merchants.models import PlatformKey

    keys = dict(PlatformKey.objects.values_list("version", "public_key_pem"))
    with receiver._lock:
        requests_ = list(receiver.requests)
    received = []
    for request in requests_:
        body = request.body if isinstance(request.body, dict) else {}
        try:
            verify_callback(request.raw, keys)
            verified, error = True, ""
        except Exception as exc:  # noqa: BLE001 - reported by the checks
            verified, error = False, f"{type(exc).__name__}: {exc}"
        event = body.get("event")
        kind = (event if event in ("payout.reversed", "refund.terminal")
                else "collection.success" if request.path.endswith("/collection") else "payout.terminal")
        # A refund's callback is the refund's event: its number is refund_no (platform_order_no is its pay-in's).
        number = body.get("refund_no") if event == "refund.terminal" else body.get("platform_order_no")
        received.append({"path": request.path, "type": kind, "platform_order_no": number,
                         "verified": verified, "error": error, "key_version": body.get("key_version")})
    return received


# ------------------------------------------------------------------------------------------------ staff (admin)

CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


class StaffBrowser:
    """A staff member in the admin over real HTTP: signed in with the password, then the authenticator's code
    (RFC 6238, computed from the device's key as a phone would: tests/support/staff.py)."""

    def __init__(self, base: str, username: str):
        self.base, self.username = base, username
        self.session = requests.Session()

    def sign_in(self) -> None:
        from django_otp.plugins.otp_totp.models import TOTPDevice

        from tests.support.staff import fresh_totp_code

        page = self.session.get(f"{self.base}/admin/login/?next=/admin/", timeout=30)
        page = self.session.post(f"{self.base}/admin/login/", timeout=30, data={
            "csrfmiddlewaretoken": CSRF.search(page.text).group(1), "username": self.username,
            "password": PASSWORD, "next": "/admin/"})
        device = TOTPDevice.objects.get(user__username=self.username, confirmed=True)
        page = self.session.post(f"{self.base}/admin/login/code/", timeout=30, data={
            "csrfmiddlewaretoken": CSRF.search(page.text).group(1), "code": fresh_totp_code(device)})
        if page.status_code != 200 or urlsplit(page.url).path != "/admin/":
            raise RuntimeError(f"{self.username} could not sign in: {page.status_code} {page.url}")

    def post_form(self, path: str, data: dict, *, timeout: float = 30) -> requests.Response:
        token = self.session.cookies.get("csrftoken")
        if not token:
            token = CSRF.search(self.session.get(f"{self.base}/admin/", timeout=timeout).text).group(1)
        return self.session.post(f"{self.base}{path}", data={"csrfmiddlewaretoken": token, **data},
                                 headers={"Referer": f"{self.base}{path}"}, timeout=timeout)


MESSAGE = re.compile(r'<li class="(success|error|warning|info)">(.*?)</li>', re.S)


def admin_messages(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", text).strip() for _, text in MESSAGE.findall(html)]


# ---------------------------------------------------------------------------------------------------- the soak

@dataclass
class Merchant:
    ctx: object  # tests.helpers.MerchantCtx
    index: int


@dataclass
class Soak:
    opts: Options
    base: str
    env: dict
    merchants: list[Merchant]
    history: History
    receivers: object  # tests.support.receiver.CallbackReceiver
    deadline: float
    started: float
    stop: threading.Event = field(default_factory=threading.Event)
    payins: list[dict] = field(default_factory=list)  # accepted pay-ins: {"merchant", "data", "params"}
    accepted: dict = field(default_factory=dict)  # (merchant_no, kind, mch_order_no) -> params
    pool_lock: threading.Lock = field(default_factory=threading.Lock)
    errors: list[str] = field(default_factory=list)

    def next_payin(self, rng: random.Random, seen: set[str]) -> dict | None:
        """An accepted pay-in this payer has not come to yet (None, after a short wait, when there is none)."""
        with self.pool_lock:
            fresh = [p for p in self.payins if p["data"]["platform_order_no"] not in seen]
        if not fresh:
            time.sleep(0.3)
            return None
        order = fresh[rng.randrange(len(fresh))]
        seen.add(order["data"]["platform_order_no"])
        return order

    def running(self) -> bool:
        return not self.stop.is_set() and time.monotonic() < self.deadline

    # --- the merchant API ------------------------------------------------------------------------------------
    def api(self, actor: str, merchant: Merchant, path: str, params: dict, *, timeout: float = 20) -> Op:
        key = params.get("mch_refund_no") or params.get("mch_order_no") or params.get("platform_order_no", "")
        op = Op(actor, path, key, dict(params), time.monotonic())
        op.params["merchant_no"] = merchant.ctx.merchant_no
        try:
            signed = json.dumps(merchant.ctx.signed_body(params))
            response = requests.post(f"{self.base}/openapi/v1/{path}", data=signed,
                                     headers={"Content-Type": "application/json"}, timeout=timeout)
            op.http_status = response.status_code
            try:
                body = response.json()
                op.code, op.data = str(body.get("code")), body.get("data")
                op.detail = body.get("msg", "")
            except ValueError:
                op.detail = response.text[:200]
            op.outcome = "ok" if op.code == "0" else "fail"
        except requests.RequestException as exc:
            op.detail = type(exc).__name__
        op.ended = time.monotonic()
        return self.history.add(op)

    def remember(self, merchant: Merchant, kind: str, params: dict, op: Op) -> None:
        if op.outcome == "ok":
            with self.pool_lock:
                self.accepted.setdefault((merchant.ctx.merchant_no, kind, params["mch_order_no"]), dict(params))
                if kind == "pay":
                    self.payins.append({"merchant": merchant.ctx.merchant_no, "data": op.data, "params": params})

    def accepted_of(self, merchant: Merchant, kind: str) -> list[dict]:
        with self.pool_lock:
            return [p for (m, k, _), p in self.accepted.items() if m == merchant.ctx.merchant_no and k == kind]

    # --- commands --------------------------------------------------------------------------------------------
    def manage(self, actor: str, kind: str, key: str, argv: list[str], *, timeout: float = 90) -> Op:
        """`manage.py ...` as an operator runs it: exit 0 took effect, 1 refused with a message; a traceback or
        another exit status is an error."""
        op = Op(actor, kind, key, {"argv": argv}, time.monotonic())
        try:
            done = subprocess.run([sys.executable, "manage.py", *argv], cwd=ROOT, env=self.env, capture_output=True,
                                  text=True, timeout=timeout)
            op.code = str(done.returncode)
            op.outcome = "ok" if done.returncode == 0 else "fail"
            try:
                op.data = json.loads(done.stdout) if done.returncode == 0 else None
            except ValueError:
                op.data = None
            op.detail = (done.stderr or "")[-600:]
            if "Traceback" in done.stderr or done.returncode not in (0, 1):
                op.outcome, op.http_status = "error", 500
        except subprocess.TimeoutExpired:
            op.detail = "timed out"
        op.ended = time.monotonic()
        return self.history.add(op)

    def service(self, actor: str, kind: str, key: str, call) -> Op:
        """A service called in this process (what the admin, a task or a script does), on its own connection."""
        from django.db import connection

        from apps.common.staff_requests import StaffRequestRefused
        from apps.payout.services import PayoutActionRefused, PayoutNotFound

        op = Op(actor, kind, key, {}, time.monotonic())
        try:
            result = call()
            op.outcome, op.data = "ok", result if isinstance(result, dict) else {"status": getattr(result, "status",
                                                                                                     None)}
        except (PayoutActionRefused, PayoutNotFound, StaffRequestRefused) as exc:
            op.outcome, op.detail = "fail", str(exc)[:300]
        except Exception as exc:  # noqa: BLE001 - an error a staff member would see as a 500
            op.outcome, op.http_status, op.detail = "error", 500, f"{type(exc).__name__}: {exc}"[:600]
        finally:
            connection.close()
        op.ended = time.monotonic()
        return self.history.add(op)

    def admin_decide(self, actor: str, browser: StaffBrowser, payout_pk: int, number: str, decision: str) -> Op:
        path = f"/admin/payout/payoutreviewqueue/{payout_pk}/decide/"
        op = Op(actor, "admin/decide", number, {"decision": decision, "user": browser.username}, time.monotonic())
        try:
            response = browser.post_form(path, {"decision": decision, "reason": f"soak {decision}"})
            op.http_status = response.status_code
            messages = admin_messages(response.text)
            op.detail = " | ".join(messages)[:400]
            op.outcome = ("error" if response.status_code >= 500 else
                          "fail" if any(m.startswith("Refused") for m in messages) or not messages else "ok")
            op.data = {"messages": messages}
        except requests.RequestException as exc:
            op.detail = type(exc).__name__
        op.ended = time.monotonic()
        return self.history.add(op)


def payout_params(rng: random.Random, mch_order_no: str, *, amount: int | None = None) -> dict:
    """A payout: mostly under review's threshold; accounts ending 4000 fail and 4001 are returned in the sandbox."""
    if amount is None:
        roll = rng.random()
        amount = (rng.randint(100, 400_000) if roll < 0.7 else rng.randint(REVIEW_MIN, REVIEW_MIN + 500_000)
                  if roll < 0.95 else DUAL_AMOUNT)
    ending = rng.choice(["4000", "4001"] + [f"{rng.randint(0, 9999):04d}"] * 6)
    ending = ending if ending not in ("4000", "4001") or rng.random() < 0.5 else "7777"
    return {"mch_order_no": mch_order_no, "product_code": "PHP_PAYOUT", "amount": amount, "currency": "PHP",
            "payee_name": "Soak Payee", "payee_account": f"{rng.randint(10, 99)}{rng.randint(0, 9999):04d}{ending}",
            "bank_code": rng.choice(["BDO", "BPI", "GCASH"])}


def pay_params(rng: random.Random, mch_order_no: str) -> dict:
    return {"mch_order_no": mch_order_no, "product_code": rng.choice(["PHP_COLLECT_D0", "PHP_COLLECT_D1"]),
            "amount": rng.randint(100, 5_000_000), "currency": "PHP", "subject": "soak"}


def at_once(fns: list) -> None:
    """Run the callables from their own threads, released together."""
    barrier = threading.Barrier(len(fns))

    def run(fn):
        from django.db import connection

        try:
            barrier.wait(timeout=30)
            fn()
        except Exception:  # noqa: BLE001 - the op records its own outcome; this is a harness bug
            traceback.print_exc()
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(fn,), daemon=True) for fn in fns]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)


# ------------------------------------------------------------------------------------------------------ actors

def merchant_actor(soak: Soak, name: str, merchant: Merchant, rng: random.Random) -> None:
    n = 0
    while soak.running():
        n += 1
        roll = rng.random()
        mch = f"S{soak.opts.seed}-{name}-{n}"
        if roll < 0.30:
            params = pay_params(rng, mch)
            soak.remember(merchant, "pay", params, soak.api(name, merchant, "pay/create", params))
        elif roll < 0.55:
            params = payout_params(rng, mch)
            soak.remember(merchant, "payout", params, soak.api(name, merchant, "payout/create", params))
        elif roll < 0.70:  # an identical replay of an earlier create
            kind = rng.choice(["pay", "payout"])
            earlier = soak.accepted_of(merchant, kind)
            if earlier:
                params = rng.choice(earlier)
                soak.api(name, merchant, f"{kind}/create", params)
        elif roll < 0.80:  # a conflicting replay: same mch_order_no, another amount -> 2001
            kind = rng.choice(["pay", "payout"])
            earlier = soak.accepted_of(merchant, kind)
            if earlier:
                params = dict(rng.choice(earlier))
                params["amount"] += rng.randint(1, 100)
                soak.api(name, merchant, f"{kind}/create", params)
        elif roll < 0.92:  # the answer is lost (client timeout), the merchant retries the same create
            kind = rng.choice(["pay", "payout"])
            params = pay_params(rng, mch) if kind == "pay" else payout_params(rng, mch)
            first = soak.api(name, merchant, f"{kind}/create", params, timeout=0.05)
            soak.remember(merchant, kind, params, first)
            for _ in range(3):
                retry = soak.api(name, merchant, f"{kind}/create", params)
                soak.remember(merchant, kind, params, retry)
                if retry.outcome == "ok" or retry.code == "2001":
                    break
        else:  # a payout replayed from several threads at once
            params = payout_params(rng, mch)
            soak.remember(merchant, "payout", params, soak.api(name, merchant, "payout/create", params))
            at_once([lambda: soak.api(name, merchant, "payout/create", params) for _ in range(4)])
        time.sleep(rng.uniform(0.05, 0.4))


def racer_actor(soak: Soak, name: str, browser: StaffBrowser, reviewer, rng: random.Random) -> None:
    """Replays of one payout/create while reviewers decide it (admin, CLI, service) and while the
    sandbox settles an approved one."""
    from apps.payout.models import Payout
    from apps.payout.services import payout_approve, payout_reject

    n = 0
    while soak.running():
        n += 1
        merchant = soak.merchants[rng.randrange(len(soak.merchants))]
        in_review = rng.random() < 0.7
        params = payout_params(rng, f"S{soak.opts.seed}-{name}-{n}",
                               amount=rng.randint(REVIEW_MIN, REVIEW_MIN + 100_000) if in_review else
                               rng.randint(100, 400_000))
        created = soak.api(name, merchant, "payout/create", params)
        soak.remember(merchant, "payout", params, created)
        if created.outcome != "ok":
            continue
        number = created.data["platform_order_no"]
        replays = [lambda: soak.api(name, merchant, "payout/create", params) for _ in range(4)]
        if in_review:
            # Each replaying thread goes on for three replays: the CLI's decision comes a few seconds after the
            # barrier (a new Python process), and still meets replays.
            replays = [lambda: [soak.api(name, merchant, "payout/create", params) for _ in range(3)]
                       for _ in range(4)]
            pk = Payout.objects.filter(platform_order_no=number).values_list("pk", flat=True).first()
            decision = rng.choice(["approve", "reject"])
            other = rng.choice(["approve", "reject"])
            service = payout_approve if other == "approve" else payout_reject
            at_once(replays + [
                lambda: soak.admin_decide(name, browser, pk, number, decision),
                lambda: soak.manage(name, "cli/review_payout", number,
                                    ["review_payout", number, f"--{other}", "--reason", "soak race"]),
                lambda: soak.service(name, f"service/{other}", number,
                                     lambda: service(payout_id=pk, reviewer=reviewer, reason="soak race")),
            ])
        else:
            for _ in range(3):  # while the sandbox settles it (0.2 s after submission in the test settings)
                at_once(replays)
        time.sleep(rng.uniform(0.2, 1.0))


def payer_actor(soak: Soak, name: str, rng: random.Random) -> None:
    """Payers press Pay on the same hosted page from several threads; sometimes one presses Fail at once."""
    pressed: set[str] = set()
    while soak.running():
        order = soak.next_payin(rng, pressed)
        if order is None or rng.random() < 0.15:  # some payers never come: the order stays CREATED until it expires
            continue
        actions = ["pay"] * rng.randint(2, 3) + (["fail"] if rng.random() < 0.2 else [])
        at_once([lambda a=a: press(soak, name, order, a) for a in actions])
        time.sleep(rng.uniform(0.05, 0.3))


def press(soak: Soak, actor: str, order: dict, action: str) -> Op:
    url = order["data"]["pay_url"]
    url = soak.base + urlsplit(url).path  # the platform's API_ROOT is this server
    op = Op(actor, f"pay/press-{action}", order["data"]["platform_order_no"], {}, time.monotonic())
    try:
        with requests.Session() as session:
            page = session.get(url, timeout=20)
            op.http_status = page.status_code
            token = CSRF.search(page.text)
            if page.status_code == 200 and token:
                answer = session.post(url, data={"csrfmiddlewaretoken": token.group(1), "action": action},
                                      allow_redirects=False, timeout=20)
                op.http_status = answer.status_code
            op.outcome = "error" if op.http_status >= 500 else "ok" if op.http_status in (200, 302) else "fail"
    except requests.RequestException as exc:
        op.detail = type(exc).__name__
    op.ended = time.monotonic()
    return soak.history.add(op)


def frozen_payouts() -> list[tuple[int, str, int]]:
    from django.db import connection

    from apps.payout.models import Payout

    try:
        return list(Payout.objects.filter(status="FROZEN").exclude(merchant__name=INSIDER_MERCHANT)  # its own
                    .order_by("id").values_list("pk", "platform_order_no", "approvals_required")[:50])
    finally:
        connection.close()


def reviewer_actor(soak: Soak, name: str, how: str, rng: random.Random, *, browser: StaffBrowser | None = None,
                   reviewer=None) -> None:
    """Works through the review queue: approve (a second approval on two-approval payouts) or reject."""
    from apps.payout.services import payout_approve, payout_reject

    while soak.running():
        time.sleep(rng.uniform(0.3, 1.5) if how != "cli" else rng.uniform(1.5, 3.0))
        queue = frozen_payouts()
        if not queue:
            continue
        pk, number, approvals = queue[rng.randrange(min(len(queue), 5))]  # the oldest few: reviewers collide
        decision = "approve" if approvals > 1 or rng.random() < 0.65 else "reject"
        if how == "admin":
            soak.admin_decide(name, browser, pk, number, decision)
        elif how == "cli":
            soak.manage(name, "cli/review_payout", number, ["review_payout", number, f"--{decision}", "--reason",
                                                            "soak review"])
        else:
            service = payout_approve if decision == "approve" else payout_reject
            soak.service(name, f"service/{decision}", number,
                         lambda: service(payout_id=pk, reviewer=reviewer, reason="soak review"))


def batch_actor(soak: Soak, name: str, rng: random.Random) -> None:
    """Operations' commands: one platform key rotation (at 20-50 % of the load, so that callbacks are signed with
    both versions), then reconciliation and the D1 release."""
    rotate_at = soak.started + (soak.deadline - soak.started) * rng.uniform(0.2, 0.5)
    while soak.running() and time.monotonic() < rotate_at:
        time.sleep(0.5)
    if soak.running():
        soak.manage(name, "cli/rotate_platform_key", "", ["rotate_platform_key"])
    while soak.running():
        time.sleep(rng.uniform(1.0, 4.0))
        if rng.random() < 0.5:
            soak.manage(name, "cli/reconcile_channels", "", ["reconcile_channels"])
        else:
            tomorrow = (time_in_manila() + timedelta(days=1)).isoformat()
            soak.manage(name, "cli/release_settlement", "", ["release_settlement", "--as-of", tomorrow])


def reversals_actor(soak: Soak, name: str, browser: StaffBrowser, approver, rng: random.Random) -> None:
    """Reversals of SUCCESS payouts: the admin's Reverse (a staff request by one operator over HTTP, approved by a
    second person), or `reverse_payout`."""
    from apps.common.models import StaffRequest
    from apps.common.staff_requests import staff_request_approve
    from apps.payout.models import Payout

    while soak.running():
        time.sleep(rng.uniform(1.0, 3.0))
        candidates = list(Payout.objects.filter(status="SUCCESS", reversed_at__isnull=True).order_by("id")
                          .values_list("pk", "platform_order_no", "amount", "fee")[:20])
        if not candidates:
            continue
        pk, number, amount, fee = candidates[rng.randrange(len(candidates))]
        reversal, refund = rng.choice([(amount, fee), (max(1, amount // 2), 0)])
        if rng.random() < 0.3:
            soak.manage(name, "cli/reverse_payout", number, ["reverse_payout", number, "--amount", str(reversal),
                                                             "--fee-refund", str(refund), "--reason", "soak"])
            continue
        asked = Op(name, "admin/reverse-request", number, {"reversal_amount": reversal, "fee_refund": refund},
                   time.monotonic())
        try:
            response = browser.post_form("/admin/payout/payout/", {
                "action": "reverse_selected", "_selected_action": str(pk), "select_across": "0", "index": "0",
                "apply": "1", "reversal_amount": str(reversal), "fee_refund": str(refund), "reason": "soak"})
            asked.http_status = response.status_code
            asked.detail = " | ".join(admin_messages(response.text))[:300]
            asked.outcome = "error" if response.status_code >= 500 else "ok" if "requested" in asked.detail \
                else "fail"
        except requests.RequestException as exc:
            asked.detail = type(exc).__name__
        asked.ended = time.monotonic()
        soak.history.add(asked)
        request = (StaffRequest.objects.filter(kind=StaffRequest.Kind.PAYOUT_REVERSAL, payload__payout_id=pk,
                                               status=StaffRequest.Status.PENDING).order_by("-id").first())
        if request is not None:
            approved = soak.service(name, "service/approve-reversal", number, lambda: staff_request_approve(
                request_id=request.pk, approver=approver, reason="soak second person"))
            approved.params = {"reversal_amount": request.payload["reversal_amount"],
                               "fee_refund": request.payload["fee_refund"]}


def time_in_manila():
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from django.conf import settings

    return datetime.now(ZoneInfo(settings.SETTLEMENT_TIME_ZONE)).date()


# ------------------------------------------------------------------------------------------------------- faults

def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@dataclass
class Fleet:
    """What serves the soak: one platform, or several hosts behind HAProxy (--hosts). A fault on a host's processes
    takes the lock, and never meets the kill of that host."""

    base: str
    env: dict  # the environment of the CLI actors' `manage.py`
    platforms: list  # tests.faults.processes.Platform, one per host
    hosts: list = field(default_factory=list)  # tests.support.hosts.Host, with --hosts
    proxy: object = None  # tests.support.haproxy.HAProxy, with --hosts
    lock: threading.Lock = field(default_factory=threading.Lock)
    down: set = field(default_factory=set)  # the names of the hosts killed and not yet back in the proxy's rotation

    def platform_up(self, rng: random.Random) -> tuple:
        """One platform whose host is up, and the host's name (None with one host); the caller holds the lock."""
        up = [(h.platform, h.name) for h in self.hosts if h.name not in self.down] or [(self.platforms[0], None)]
        return up[rng.randrange(len(up))]


def fault_actor(soak: Soak, fleet: Fleet, redis, rng: random.Random) -> None:
    from django.db import connection

    while soak.running():
        if soak.stop.wait(rng.uniform(0.5, 1.5) * soak.opts.fault_every) or not soak.running():
            return
        kind = rng.choice(["kill_web_worker", "kill_celery_worker", "terminate_backends", "stall_redis"])
        started = time.monotonic()
        detail = {}
        try:
            if kind == "kill_web_worker":
                with fleet.lock:
                    platform, detail["host"] = fleet.platform_up(rng)
                    workers = children(platform.web.pid)
                    if workers:
                        victim = workers[rng.randrange(len(workers))]
                        started = time.monotonic()
                        os.kill(victim, signal.SIGKILL)  # gunicorn's arbiter starts a new one
                        detail["pid"] = victim
            elif kind == "kill_celery_worker":
                with fleet.lock:
                    platform, detail["host"] = fleet.platform_up(rng)
                    doomed = platform.workers[-1]
                    doomed.kill(signal.SIGKILL)
                    doomed.popen.wait(timeout=10)
                    worker = platform.start_worker(concurrency=soak.opts.worker_concurrency,
                                                   pool=soak.opts.worker_pool, wait=False)
                # Its boot is waited for outside the lock: a host kill meanwhile kills it too (the error is reported).
                worker.wait_for_log(" ready.", timeout=platform.ready_timeout)
            elif kind == "terminate_backends":
                with psycopg.connect(soak.env["DATABASE_URL"], autocommit=True) as admin:
                    pids = [row[0] for row in admin.execute(
                        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> "
                        "pg_backend_pid() AND application_name <> %s ORDER BY pid", [HARNESS_APP]).fetchall()]
                    victims = rng.sample(pids, min(len(pids), rng.randint(1, 3)))
                    for pid in victims:
                        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
                    detail["backends"] = len(victims)
            else:
                seconds = rng.uniform(2.0, 5.0)
                redis.freeze()
                try:
                    soak.stop.wait(seconds)
                finally:
                    redis.thaw()
                detail["seconds"] = round(seconds, 1)
        except Exception as exc:  # noqa: BLE001 - a fault that could not be injected is reported, not fatal
            detail["error"] = f"{type(exc).__name__}: {exc}"[:200]
        finally:
            connection.close()
        # A gunicorn worker's kill to the millisecond: the requests in flight at it are excused (History.excused).
        ended = time.monotonic() if kind != "kill_web_worker" else started
        soak.history.fault(kind, round(started - soak.started, 3), round(ended - soak.started, 3),
                           **{k: v for k, v in detail.items() if v is not None})


def hosts_actor(soak: Soak, fleet: Fleet, rng: random.Random) -> None:
    """Whole hosts SIGKILLed in turn (host0, host1, ...), each started again after 2-6 s dead; the next kill comes
    `--host-kill-every` (0.75-1.25 x) after the host is back in the proxy's rotation, so one host always serves. A
    host killed is always started again, also when the load ends while it is dead."""
    from tests.support.wait import wait_until

    n = 0
    while soak.running():
        if soak.stop.wait(rng.uniform(0.75, 1.25) * soak.opts.host_kill_every) or not soak.running():
            return
        host = fleet.hosts[n % len(fleet.hosts)]
        n += 1
        with fleet.lock:
            started = time.monotonic()
            host.kill()
            fleet.down.add(host.name)
            ended = time.monotonic()
        fault = soak.history.fault("kill_host", round(started - soak.started, 3), round(ended - soak.started, 3),
                                   host=host.name)
        dead = rng.uniform(2.0, 6.0)
        time.sleep(dead)
        host.start()
        wait_until(lambda name=host.name: fleet.proxy.servers()[name]["status"] == "UP", timeout=60, interval=0.2,
                   what=f"the proxy sending to {host.name} again")
        fault.update(dead_seconds=round(dead, 1), back_in_rotation_after=round(time.monotonic() - started, 1))
        with fleet.lock:
            fleet.down.discard(host.name)


# ------------------------------------------------------------------------------------------------------ set-up

_CLAIMS: list = []  # the sessions holding this process's database claims, open until it ends


def recreate_database(opts: Options) -> str:
    """Drop and create the deployment's database, claimed first: a session-level advisory lock on its name, held
    until this process ends, so that a second soak given the same name (two checkouts with one DATABASE_URL) stops
    with a message instead of dropping the first one's database under it (DROP ... WITH (FORCE))."""
    claim = psycopg.connect(f"{opts.postgres}/postgres?application_name={HARNESS_APP}", autocommit=True)
    if not claim.execute("SELECT pg_try_advisory_lock(hashtext(%s))", [f"soak:{opts.database}"]).fetchone()[0]:
        claim.close()
        raise RuntimeError(f"database {opts.database} belongs to a soak running now: give this one a database of its "
                           f"own (SOAK_DATABASE=<name>, or another DATABASE_URL)")
    _CLAIMS.append(claim)
    drop_and_create(claim, opts.database, opts.template)
    return f"{opts.postgres}/{opts.database}"


def set_up_data(opts: Options, receivers) -> tuple[list[Merchant], dict]:
    from io import StringIO

    from django.core.management import call_command

    from apps.common import signing
    from apps.ledger.services import balance_adjust
    from apps.merchants.services import merchant_create
    from apps.payout.permissions import staff_create
    from tests.helpers import MerchantCtx
    from tests.support.staff import add_authenticator

    call_command("migrate", verbosity=0)  # everything, or nothing on a copy of a migrated template
    call_command("bootstrap", stdout=StringIO())
    merchants = []
    for i in range(opts.merchants):
        key = signing.generate_private_key()
        created = merchant_create(name=f"Soak merchant {i}", currencies=["PHP"],
                                  public_key_pem=signing.public_key_to_pem(key.public_key()),
                                  collection_callback_url=callback_url(receivers, i, "collection"),
                                  payout_callback_url=callback_url(receivers, i, "payout"))
        balance_adjust(merchant_no=created.merchant.merchant_no, currency="PHP", amount=TOP_UP, reason="soak float")
        merchants.append(Merchant(MerchantCtx(created.merchant.merchant_no, created.app.app_id, 1, key,
                                              created.merchant), i))
    staff = {}
    for username, role in [("soak-reviewer-a", "risk-reviewer"), ("soak-reviewer-b", "risk-reviewer"),
                           ("soak-reviewer-c", "risk-reviewer"), ("soak-racer", "risk-reviewer"),
                           ("soak-ops-a", "operator"), ("soak-ops-b", "operator")]:
        user = staff_create(username=username, role=role, password=PASSWORD)
        add_authenticator(user)
        staff[username] = user
    return merchants, staff


# ------------------------------------------------------------------------------------------------------ checks

def check(ok: bool, **detail) -> dict:
    return {"ok": bool(ok), **detail}


def run_checks(soak: Soak) -> dict:
    from django.db.models import Count, Sum

    from apps.callbacks.models import CallbackAttempt, CallbackEvent
    from apps.collection.models import CollectionOrder, Refund
    from apps.ledger.models import Hold, Posting
    from apps.ledger.selectors import ledger_verify, merchant_balances
    from apps.payout.models import Payout
    from tests.soak.refunds import refund_checks, refund_figures

    ops = soak.history.ops
    checks: dict[str, dict] = {}

    # 1. no 5xx and no 9999 seen by any actor (unless a fault that documents 9999 was in flight).
    bad, excused = [], Counter()
    for op in ops:
        if not soak.history.failed(op):
            continue
        fault = soak.history.excused(op)
        if fault:
            excused[fault] += 1
            op.outcome = "info"
        else:
            bad.append(op)
    checks["no_5xx_no_9999"] = check(not bad, count=len(bad), by_kind=dict(Counter(op.kind for op in bad)),
                                     excused_by_fault=dict(excused),
                                     samples=[soak.history.sample(op) for op in bad[:8]],
                                     **({"host_kills": soak.history.kills()} if soak.history.behind_proxy else {}))

    # 2. every order terminal or legitimately waiting.
    stuck = list(Payout.objects.exclude(status__in=TERMINAL_PAYOUT + WAITING_PAYOUT)
                 .values("platform_order_no", "status", "upstream_reference", "updated_at"))
    waiting = Counter(Payout.objects.filter(status__in=WAITING_PAYOUT).values_list("status", flat=True))
    checks["orders_terminal_or_waiting"] = check(not stuck, stuck=len(stuck), waiting=dict(waiting),
                                                 samples=[{**s, "updated_at": s["updated_at"].isoformat()}
                                                          for s in stuck[:8]])

    # 3. no hold left on a terminal order (and every waiting order still holds its funds).
    held_terminal = list(Payout.objects.filter(status__in=TERMINAL_PAYOUT, hold__status=Hold.Status.HELD)
                         .values_list("platform_order_no", flat=True))
    unheld_open = list(Payout.objects.exclude(status__in=TERMINAL_PAYOUT).exclude(hold__status=Hold.Status.HELD)
                       .values_list("platform_order_no", flat=True))
    checks["no_hold_on_terminal_order"] = check(not held_terminal and not unheld_open,
                                                held_on_terminal=held_terminal[:8], open_without_hold=unheld_open[:8])

    # 4. every terminal event delivered once per callback type, signature verified.
    expected = {(n, "collection.success") for n in CollectionOrder.objects.filter(status="SUCCESS")
                .values_list("platform_order_no", flat=True)}
    expected |= {(n, "payout.terminal") for n in Payout.objects.filter(status__in=TERMINAL_PAYOUT)
                 .values_list("platform_order_no", flat=True)}
    expected |= {(n, "payout.reversed") for n in Payout.objects.filter(reversed_at__isnull=False)
                 .values_list("platform_order_no", flat=True)}
    expected |= {(n, "refund.terminal") for n in Refund.objects.filter(status__in=Refund.TERMINAL)
                 .values_list("refund_no", flat=True)}
    events = Counter(CallbackEvent.objects.values_list("platform_order_no", "type"))
    undelivered = list(CallbackEvent.objects.exclude(status="delivered").values_list("platform_order_no", "type",
                                                                                     "status"))
    received = callbacks_received(soak.receivers)
    got = Counter((r["platform_order_no"], r["type"]) for r in received if r["verified"])
    unverified = [r for r in received if not r["verified"]]
    retried = {(n, t) for n, t in CallbackAttempt.objects.values("event__platform_order_no", "event__type")
               .annotate(n=Count("id")).filter(n__gt=1).values_list("event__platform_order_no", "event__type")}
    missing = sorted(expected - set(got))
    unexpected = sorted(set(got) - expected)
    twice_in_db = sorted(k for k, v in events.items() if v > 1)
    duplicates = sorted(k for k, v in got.items() if v > 1 and k not in retried)
    checks["callbacks_once_per_type"] = check(
        not missing and not unexpected and not twice_in_db and not undelivered and not unverified and not duplicates,
        expected=len(expected), received=sum(got.values()), missing=len(missing), missing_samples=missing[:8],
        unexpected=unexpected[:8], events_twice=twice_in_db[:8], undelivered=undelivered[:8],
        unverified=[{k: r[k] for k in ("path", "platform_order_no", "error")} for r in unverified[:8]],
        duplicates_without_a_retry=duplicates[:8],
        redelivered_after_a_lost_attempt=sum(v - 1 for k, v in got.items() if v > 1 and k in retried))

    # 5. balances equal the ledger, verify_ledger ok; and both equal what the orders say (model of the bank).
    verified = ledger_verify()
    command = subprocess.run([sys.executable, "manage.py", "verify_ledger"], cwd=ROOT, env=soak.env,
                             capture_output=True, text=True, timeout=120)
    model_mismatch, api_mismatch = [], []
    for merchant in soak.merchants:
        mid = merchant.ctx.merchant.pk
        ledger = merchant_balances(merchant_id=mid, currency="PHP")
        expected_balances = _balances_from_orders(mid)
        if ledger != expected_balances:
            model_mismatch.append({"merchant": merchant.ctx.merchant_no, "ledger": ledger,
                                   "from_orders": expected_balances})
        answer = soak.api("checker", merchant, "balance", {"currency": "PHP"})
        if answer.outcome != "ok" or {k: answer.data[k] for k in ("available", "settling")} != {
                k: ledger[k] for k in ("available", "settling")}:
            api_mismatch.append({"merchant": merchant.ctx.merchant_no, "api": answer.data, "ledger": ledger})
    checks["ledger"] = check(verified["ok"] and command.returncode == 0 and not model_mismatch and not api_mismatch,
                             verify_ledger=verified["ok"], verify_ledger_command=command.returncode,
                             failures=verified.get("failures", [])[:5], balances_vs_orders=model_mismatch,
                             balance_api_vs_ledger=api_mismatch)

    # 6. every accepted request took effect exactly once, every refused one not at all.
    checks["history_exactly_once"] = _check_history(soak, ops)

    # 7. refunds: none beyond what was paid, each terminal or legitimately waiting, each answer as stored.
    checks.update(refund_checks(soak, ops))

    postings = Counter(Posting.objects.values_list("kind", flat=True))
    figures = {
        "requests": len(ops), "by_kind": dict(Counter(op.kind for op in ops)),
        "outcomes": dict(Counter(op.outcome for op in ops)),
        "slowest_seconds": {kind: round(max(op.ended - op.started for op in ops if op.kind == kind), 2)
                            for kind in sorted({op.kind for op in ops})},
        "codes": dict(Counter(op.code for op in ops if op.code is not None)),
        "faults": dict(Counter(f["kind"] for f in soak.history.faults)),
        "payins": dict(Counter(CollectionOrder.objects.values_list("status", flat=True))),
        "payouts": dict(Counter(Payout.objects.values_list("status", flat=True))),
        "reversed": Payout.objects.filter(reversed_at__isnull=False).count(),
        "postings": dict(postings),
        "callbacks_received": len(received),
        "platform_key_versions": sorted({r["key_version"] for r in received if r["verified"]}),
        "credited": CollectionOrder.objects.filter(status="SUCCESS").aggregate(s=Sum("amount"))["s"] or 0,
        **refund_figures(),
    }
    return {"checks": checks, "figures": figures}


def _balances_from_orders(merchant_id: int) -> dict:
    """What the merchant's balances must be from its orders and refunds alone, independently of the ledger."""
    from django.db.models import F, Sum

    from apps.collection.models import CollectionOrder
    from apps.payout.models import Payout
    from tests.soak.refunds import refund_expected_balances

    def total(queryset, expression) -> int:
        return queryset.aggregate(s=Sum(expression))["s"] or 0

    payins = CollectionOrder.objects.filter(merchant_id=merchant_id, currency_id="PHP", status="SUCCESS")
    payouts = Payout.objects.filter(merchant_id=merchant_id, currency_id="PHP")
    settling = total(payins.filter(settlement="D1", settled_at__isnull=True), F("amount") - F("fee"))
    refunds = refund_expected_balances(merchant_id)
    frozen = total(payouts.exclude(status__in=TERMINAL_PAYOUT), F("amount") + F("fee")) + refunds["frozen"]
    everything = (TOP_UP + total(payins, F("amount") - F("fee"))
                  - total(payouts.filter(status="SUCCESS"), F("amount") + F("fee"))
                  + total(payouts.filter(reversed_at__isnull=False), F("reversal_amount") + F("fee_refund"))
                  - refunds["left"])
    return {"available": everything - settling - frozen, "settling": settling, "frozen": frozen}


def _check_history(soak: Soak, ops: list[Op]) -> dict:
    from apps.collection.models import CollectionOrder
    from apps.ledger.models import Posting
    from apps.payout.models import Payout

    problems: list[dict] = []
    sample = soak.history.sample
    stored = {("pay", m, o): (n, a) for m, o, n, a in CollectionOrder.objects.values_list(
        "merchant__merchant_no", "mch_order_no", "platform_order_no", "amount")}
    stored |= {("payout", m, o): (n, a) for m, o, n, a in Payout.objects.values_list(
        "merchant__merchant_no", "mch_order_no", "platform_order_no", "amount")}
    creates = [op for op in ops if op.kind in ("pay/create", "payout/create")]
    accepted_keys = {(op.kind.split("/")[0], op.params["merchant_no"], op.key) for op in creates
                     if op.outcome == "ok"}
    for op in creates:
        key = (op.kind.split("/")[0], op.params["merchant_no"], op.key)
        row = stored.get(key)
        if op.outcome == "ok":
            if row is None:
                problems.append({"accepted_but_absent": sample(op)})
            elif (op.data or {}).get("platform_order_no") != row[0] or op.params["amount"] != row[1]:
                problems.append({"accepted_but_different": sample(op), "stored": row})
        elif op.code == "2001":
            if row is None or row[1] == op.params["amount"]:
                problems.append({"conflict_answered_but_stored_matches": sample(op), "stored": row})
        elif op.outcome == "fail" and op.code and op.code[0] in "12" and key not in accepted_keys and row:
            problems.append({"refused_but_stored": sample(op), "stored": row})

    # Money moved once per order: one credit per paid pay-in, none for the others; one reversal at most.
    per_cause = Counter(Posting.objects.filter(kind__in=["collection.success", "payout.reversal"])
                        .values_list("kind", "cause"))
    twice = [k for k, v in per_cause.items() if v > 1]
    paid = set(CollectionOrder.objects.filter(status="SUCCESS").values_list("platform_order_no", flat=True))
    credited = {cause for kind, cause in per_cause if kind == "collection.success"}
    if twice or paid != credited:
        problems.append({"credits": {"twice": twice[:5], "paid_not_credited": sorted(paid - credited)[:5],
                                     "credited_not_paid": sorted(credited - paid)[:5]}})

    # Decisions: whoever was told "rejected" sees REJECTED; nobody told "approved" sees REJECTED.
    final = dict(Payout.objects.values_list("platform_order_no", "status"))
    for op in ops:
        if op.outcome != "ok" or not op.kind.startswith(("admin/decide", "cli/review_payout", "service/approve",
                                                         "service/reject")):
            continue
        said = _decision_said(op)
        if said == "rejected" and final.get(op.key) != "REJECTED" or said == "approved" and final.get(
                op.key) == "REJECTED":
            problems.append({"decision_contradicted": sample(op), "said": said, "final": final.get(op.key)})

    # Reversals: each one answered as done is on the order with its amounts, once.
    reversals = dict((n, (a, f)) for n, a, f in Payout.objects.filter(reversed_at__isnull=False).values_list(
        "platform_order_no", "reversal_amount", "fee_refund"))
    for op in ops:
        if op.outcome != "ok" or op.kind not in ("cli/reverse_payout", "service/approve-reversal"):
            continue
        argv = op.params.get("argv")
        want = ((int(argv[3]), int(argv[5])) if argv else (op.params["reversal_amount"], op.params["fee_refund"]))
        if reversals.get(op.key) != want:
            problems.append({"reversal_not_as_answered": sample(op), "stored": reversals.get(op.key)})
    return check(not problems, problems=len(problems), samples=problems[:10])


def _decision_said(op: Op) -> str | None:
    if op.kind == "admin/decide":
        # Only the messages about this payout: the page may also show one left in the session by an earlier decision.
        text = " | ".join(m for m in (op.data or {}).get("messages", []) if op.key in m)
        return "rejected" if " rejected: now" in text else "approved" if " approved: now" in text else None
    status = (op.data or {}).get("status")
    return "rejected" if status == "REJECTED" else "approved" if status in ("APPROVED", "PROCESSING", "SUCCESS",
                                                                           "FAILED") else None


# -------------------------------------------------------------------------------------------------------- main

def quiet_period(soak: Soak, fleet: Fleet, redis, budget: float, *, upstreams=None, rng=None) -> float:
    """Faults off, workers and beat left to finish: until no order or refund is on its way and every callback is
    delivered, or the budget runs out. Live: Xendit and PayMongo decide what is still open and send their late
    webhooks, and operations run `reconcile_channels` (what a lost webhook left) every 20 s while a payout is
    PROCESSING (a refund whose webhook was lost is the refund sweep's, every 15 s)."""
    from django.db import connection

    from apps.callbacks.models import CallbackEvent
    from apps.collection.models import Refund
    from apps.payout.models import Payout

    started = time.monotonic()
    redis.thaw()
    for platform in fleet.platforms:
        if not platform.workers[-1].alive():
            platform.start_worker(concurrency=soak.opts.worker_concurrency, pool=soak.opts.worker_pool)
    reconciled = started
    while time.monotonic() - started < budget:
        if upstreams is not None:
            from tests.soak.upstream import upstream_finish

            upstream_finish(upstreams, rng)
            if time.monotonic() - reconciled > 20 and Payout.objects.filter(status="PROCESSING").exists():
                soak.manage("ops-quiet", "cli/reconcile_channels", "", ["reconcile_channels"])
                reconciled = time.monotonic()
        busy = (Payout.objects.filter(status__in=["APPROVED", "PROCESSING"]).exists()
                or Refund.objects.filter(status=Refund.Status.PROCESSING).exists()
                or CallbackEvent.objects.exclude(status="delivered").exists())
        connection.close()
        if not busy:
            break
        time.sleep(2)
    time.sleep(2)  # a callback being answered at this moment is recorded by the receiver
    return round(time.monotonic() - started, 1)


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)

    def terminate(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, terminate)
    result = run_deployment(opts) if opts.deployment else orchestrate(opts, sys.argv[1:] if argv is None else argv)
    print(json.dumps(result, indent=1, default=str), flush=True)
    return 0 if result.get("ok") else 1


def orchestrate(opts: Options, argv: list[str]) -> dict:
    """Each deployment in a child process of its own (Django is set up once per process, for one database and one
    PLATFORM_ENVIRONMENT), side by side (each on its own database, redis-server, ports and log directory; its own
    share of the load time); their JSON objects combined into one. `--in-turn`: one after the other."""
    wanted = [d for d in DEPLOYMENTS if d in opts.deployments.split(",")]
    print(f"soak: seed {opts.seed}, {opts.seconds:g} s of load over {', '.join(wanted)}"
          f" ({'one after the other' if opts.in_turn else 'side by side'})", file=sys.stderr, flush=True)
    logdir = opts.logdir or Path(tempfile.mkdtemp(prefix="soak-"))
    result: dict = {"seed": opts.seed, "seconds": opts.seconds, "deployments": {}}
    outputs: dict[str, str] = {}
    children: dict[str, subprocess.Popen] = {}

    def start(deployment: str) -> subprocess.Popen:
        seconds = opts.seconds * SHARE[deployment] / sum(SHARE[d] for d in wanted)
        child = subprocess.Popen([sys.executable, "-m", "tests.soak.harness", *argv, "--deployment", deployment,
                                  "--seconds", f"{seconds:.1f}", "--seed", str(opts.seed),
                                  "--logdir", str(logdir / deployment)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        children[deployment] = child
        return child

    def collect(deployment: str, child: subprocess.Popen) -> None:
        outputs[deployment], _ = child.communicate()

    try:
        if opts.in_turn:
            for deployment in wanted:
                collect(deployment, start(deployment))
        else:
            readers = [threading.Thread(target=collect, args=(deployment, start(deployment)), daemon=True)
                       for deployment in wanted]
            for reader in readers:
                reader.start()
            for reader in readers:
                while reader.is_alive():  # join in steps: a SIGTERM (KeyboardInterrupt) is taken between them
                    reader.join(timeout=1)
    finally:
        running = [child for child in children.values() if child.poll() is None]
        for child in running:  # we were interrupted: each child ends what it started
            child.terminate()
        for child in running:
            child.wait(timeout=120)
    for deployment in wanted:
        try:
            result["deployments"][deployment] = json.loads(outputs.get(deployment) or "")
        except ValueError:
            code = children[deployment].returncode if deployment in children else None
            result["deployments"][deployment] = {"ok": False, "error": f"no JSON (exit {code})"}
    result["ok"] = bool(wanted) and all(d.get("ok") for d in result["deployments"].values())
    result["failed_checks"] = [f"{name}.{check}" for name, d in result["deployments"].items()
                               for check, c in d.get("checks", {}).items() if not c["ok"]]
    return result


def run_deployment(opts: Options) -> dict:
    """One deployment (sandbox or live) on its own database and redis-server: set up, load, quiet, checks."""
    live = opts.deployment == "live"
    opts.database = f"{opts.database}_{opts.deployment}"
    where = "make run's default stack" if opts.stack == "make-run" else f"database {opts.database}"
    print(f"soak {opts.deployment}: seed {opts.seed}, {opts.seconds:g} s, {where}", file=sys.stderr, flush=True)
    logdir = opts.logdir or Path(tempfile.mkdtemp(prefix="soak-"))
    logdir.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    from tests.faults.processes import Platform, PrivateRedis, Processes

    procs = Processes(logdir)
    deployment_env = {"PLATFORM_ENVIRONMENT": opts.deployment}
    if live:
        # A lost webhook is found by reconciliation within the run; the emulator stalls a "lost" create answer 6 s,
        # past the 4 s timeout (which a loaded machine's honest answers stay well under).
        deployment_env.update(CHANNEL_HTTP_TIMEOUT_SECONDS="4.0", CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS="20")
    platform_env = {"CALLBACK_REDISPATCH_SECONDS": 5, "RATE_LIMIT_PER_SECOND": 100000, **deployment_env}
    stack = vhost = None
    if opts.stack == "make-run":
        # Started here: its servers' addresses are what Django is set up with.
        stack = MakeRunStack(platform_env, logdir)
        redis = stack
        os.environ.update({"DJANGO_SETTINGS_MODULE": "config.settings.local", "REDIS_URL": stack.redis_url(),
                           "DATABASE_URL": f"{stack.database_url()}&application_name={HARNESS_APP}",
                           "API_ROOT": stack.base, **deployment_env})
    else:
        redis = PrivateRedis(procs)
        url = recreate_database(opts)
        os.environ.update({"DJANGO_SETTINGS_MODULE": "config.settings.test", "REDIS_URL": redis.url,
                           "DATABASE_URL": f"{url}?application_name={HARNESS_APP}", **deployment_env})
        if opts.broker == "rabbitmq":
            from tests.support.rabbitmq import RabbitVhost

            vhost = RabbitVhost(f"soak-{opts.deployment}").create()
            # This process queues tasks too (the service actors): on the same vhost as the platform's processes.
            os.environ["CELERY_BROKER_URL"] = platform_env["broker_url"] = vhost.url
    import django

    django.setup()
    from tests.soak import upstream
    from tests.soak.insider import insider_actor, insider_refused, insider_set_up, insider_state
    from tests.soak.refunds import portal_desks_set_up, refunds_actor

    from tests.support.receiver import CallbackReceiver

    receivers = CallbackReceiver().start()
    emulator = upstream.XenditEmulator(stall_seconds=6.0).start() if live else None
    paymongo = upstream.PayMongoEmulator(stall_seconds=6.0).start() if live else None
    result: dict = {"deployment": opts.deployment, "seed": opts.seed, "seconds": opts.seconds,
                    "broker": "redis" if stack is not None else opts.broker}
    try:
        redis.start()
        merchants, staff = set_up_data(opts, receivers)
        insider = None if live else insider_set_up(receivers, len(merchants))
        if live:
            upstream.live_channels_create(emulator, paymongo)
        if stack is not None:
            fleet = Fleet(stack.base, stack.env, [stack])
        elif opts.hosts > 1:
            fleet = several_hosts(opts, procs, redis, logdir, platform_env)
        else:
            platform = Platform(procs, redis, ready_timeout=120, **platform_env)
            platform.start_web(workers=opts.web_workers)
            platform.start_beat()
            platform.start_worker(concurrency=opts.worker_concurrency, pool=opts.worker_pool)
            fleet = Fleet(platform.base, platform.env, [platform])
        browsers = {name: StaffBrowser(fleet.base, name) for name in
                    ("soak-reviewer-a", "soak-reviewer-b", "soak-racer", "soak-ops-a")}
        for browser in browsers.values():
            browser.sign_in()
        desks = portal_desks_set_up(fleet.base, merchants)

        started = time.monotonic()
        history = History(started, behind_proxy=bool(fleet.hosts),
                          upstream_timeout=float(deployment_env["CHANNEL_HTTP_TIMEOUT_SECONDS"]) if live else None)
        soak = Soak(opts, fleet.base, fleet.env, merchants, history, receivers,
                    deadline=started + opts.seconds, started=started)
        upstreams = upstream.Upstreams(soak, emulator, paymongo) if live else None
        rng = lambda name: random.Random(f"{opts.seed}/{opts.deployment}/{name}")  # noqa: E731 - one per actor
        payer = upstream.live_payer_actor if live else payer_actor
        actors = [(f"merchant-{m.index}", merchant_actor, (m,)) for m in merchants]
        actors += [("racer", racer_actor, (browsers["soak-racer"], staff["soak-reviewer-c"]))]
        actors += [(f"payer-{i}", payer, ()) for i in range(opts.payers)]
        actors += [("reviewer-admin-a", reviewer_actor, ("admin",)), ("reviewer-admin-b", reviewer_actor, ("admin",)),
                   ("reviewer-cli", reviewer_actor, ("cli",)), ("reviewer-service", reviewer_actor, ("service",))]
        actors += [("ops-reversals", reversals_actor, (browsers["soak-ops-a"], staff["soak-ops-b"])),
                   ("ops-batch", batch_actor, ())]
        if live:
            actors += [("upstreams", upstream.upstream_actor, (upstreams,))]
        if insider is not None:
            actors += [("insider", insider_actor, (insider,))]
        actors += [("refunds", refunds_actor, (desks,))]
        threads, faults, host_kills = [], None, None
        for name, fn, args in actors:
            kwargs = {}
            if fn is reviewer_actor:
                kwargs = {"browser": browsers.get("soak-reviewer-" + name[-1]),
                          "reviewer": staff["soak-reviewer-c"]}
            threads.append(threading.Thread(target=_guarded, args=(soak, name, fn, (soak, name, *args,
                                                                                    rng(name)), kwargs),
                                            name=name, daemon=True))
        if opts.faults:
            faults = threading.Thread(target=_guarded, args=(soak, "faults", fault_actor,
                                                             (soak, fleet, redis, rng("faults")), {}),
                                      name="faults", daemon=True)
        if opts.faults and fleet.hosts:
            host_kills = threading.Thread(target=_guarded, name="hosts", daemon=True,
                                          args=(soak, "hosts", hosts_actor, (soak, fleet, rng("hosts")), {}))
        for thread in threads + [t for t in (faults, host_kills) if t]:
            thread.start()
        for thread in threads:
            thread.join(timeout=max(1.0, soak.deadline - time.monotonic()) + 180)
        load_seconds = round(time.monotonic() - started, 1)
        soak.stop.set()
        if faults:
            faults.join(timeout=60)
        if host_kills:  # a host killed at the end of the load is started again first (up to 2 minutes on 2 cores)
            host_kills.join(timeout=240)
        quiet = quiet_period(soak, fleet, redis, opts.quiet_seconds, upstreams=upstreams, rng=rng("quiet"))
        result.update(run_checks(soak))
        if fleet.hosts:
            result["checks"]["beat_one_sender"] = beat_one_sender(fleet, history)
        if insider is not None:
            result["checks"]["insider_refused"] = insider_refused(soak.history.ops, insider.before,
                                                                  insider_state(insider), soak.history.sample,
                                                                  soak.history.excused)
        if live:
            result["checks"]["upstream_agrees"] = upstream.upstream_agrees(emulator, paymongo)
        with open(logdir / "history.jsonl", "w") as handle:  # the client-side history, for a person to read
            for op in soak.history.ops:
                handle.write(json.dumps({**op.__dict__, "started": round(op.started - started, 3),
                                         "ended": round(op.ended - started, 3)}, default=str) + "\n")
        result["figures"].update(load_seconds=load_seconds, quiet_seconds=quiet,
                                 fault_log=soak.history.faults[:40], harness_errors=soak.errors[:5],
                                 deadlocks_in_logs=sum(p.log().count("deadlock detected") for p in procs.started)
                                 + (stack.text().count("deadlock detected") if stack else 0),
                                 logs=str(logdir))
        if fleet.hosts:
            result["figures"]["hosts"] = hosts_figures(fleet)
        result["ok"] = all(c["ok"] for c in result["checks"].values()) and not soak.errors
    except BaseException as exc:  # noqa: BLE001 - the JSON says what went wrong; processes are ended below
        result.update(ok=False, error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()[-3000:])
    finally:
        try:
            redis.thaw() if redis.proc is not None else None
        except Exception:  # noqa: BLE001
            pass
        procs.stop_all()
        if stack is not None:
            stack.stop()
        if vhost is not None:
            vhost.delete()
        receivers.stop()
        for upstream_emulator in (emulator, paymongo):
            if upstream_emulator is not None:
                upstream_emulator.stop()
    return result


def several_hosts(opts: Options, procs, redis, logdir: Path, platform_env: dict) -> Fleet:
    """`--hosts N`: N hosts behind HAProxy, through PgBouncer to the deployment's database (tests/support/hosts.py);
    the CLI actors reach the database through PgBouncer as the hosts do."""
    from tests.support.hosts import bouncer_start, hosts_start

    # Transaction pooling: a server connection per transaction running at once, not per process or thread.
    bouncer = bouncer_start(procs, logdir, pool_size=10)
    # BEAT_LOCK_SECONDS=5: a killed host's beat is replaced within 5 s (the default 30 s would skip six 5 s sweeps).
    hosts, proxy = hosts_start(procs, redis, bouncer, count=opts.hosts, web_workers=opts.web_workers,
                               worker_concurrency=opts.worker_concurrency, worker_pool=opts.worker_pool,
                               BEAT_LOCK_SECONDS=5, **platform_env)
    return Fleet(proxy.base, hosts[0].platform.env, [h.platform for h in hosts], hosts=hosts, proxy=proxy)


BEAT_SENT = re.compile(r"^(\S+Z) .*Sending due task (\S+)", re.MULTILINE)


def beat_one_sender(fleet: Fleet, history: History) -> dict:
    """Every host runs a beat (config/beat.py): each periodic task is sent by one beat at a time. The sender of a task
    changes only when its last sender may have lost the beat lock between its last send and the new sender's first:
    its host was killed, or Redis was stalled past the lock's renewal. Any other change is two beats sending."""
    from datetime import datetime

    def walls(kind: str, host: str | None = None) -> list[tuple[float, float]]:
        return [(history.wall0 + f["started"], history.wall0 + f["ended"]) for f in history.faults
                if f["kind"] == kind and (host is None or f.get("host") == host)]

    sends = sorted((datetime.fromisoformat(at).timestamp(), entry, host.name, index)
                   for host in fleet.hosts for index, beat in enumerate(host.beats)
                   for at, entry in BEAT_SENT.findall(beat.log()))
    last: dict[str, tuple] = {}
    handovers, overlaps = 0, []
    for at, entry, host, index in sends:
        before = last.get(entry)
        last[entry] = (at, host, index)
        if before is None or before[1:] == (host, index):
            continue
        lost = [(a, b) for a, b in walls("kill_host", before[1]) + walls("stall_redis") if a <= at and b >= before[0]]
        if lost:
            handovers += 1
        else:
            overlaps.append({"task": entry, "sent_by": f"{before[1]} beat {before[2]}",
                             "then_by": f"{host} beat {index}", "seconds_apart": round(at - before[0], 2)})
    return check(sends and not overlaps, sends=len(sends), handovers=handovers, two_senders=overlaps[:8])


def hosts_figures(fleet: Fleet) -> dict:
    """Requests per host as the proxy counted them, and how often each host's beats took the beat lock."""
    served = {name: int(row["stot"]) for name, row in fleet.proxy.servers().items()}
    beats = {h.name: sum(beat.log().count("beat: holding the beat lock") for beat in h.beats) for h in fleet.hosts}
    return {"requests_per_host": served, "beat_lock_taken": beats}


class MakeRunStack:
    """`make run`'s default stack (tests/support/make_run.py) standing in for the Platform and the private Redis:
    the web, worker and beat of the Procfile on the embedded PostgreSQL and Valkey, in a copy of the checkout."""

    def __init__(self, platform_env: dict, logdir: Path):
        import shutil

        from tests.support.make_run import MakeRun, copy_checkout

        def remove():  # the copy, once its log is kept with the soak's
            shutil.copy(self.run.log, logdir / "make-run.log")
            shutil.rmtree(self.run.checkout.parent, ignore_errors=True)

        self._remove = remove
        self.run = MakeRun(copy_checkout(), tty=False, extra_env={k: str(v) for k, v in platform_env.items()})
        try:
            self.run.wait_ready(timeout=300)  # a fresh var/: initdb, every migration, bootstrap
        except BaseException:
            self.stop()
            raise
        self.base, self.proc = self.run.base, self.run.proc
        self.workers = [self]  # quiet_period starts a new worker when the last one died: make run stops instead
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.local",
                    "DATABASE_URL": self.database_url(), "REDIS_URL": self.redis_url(), "API_ROOT": self.base}

    def database_url(self) -> str:
        return self.run.database_url()

    def redis_url(self) -> str:
        return self.run.redis_url()

    def text(self) -> str:
        return self.run.text()

    def alive(self) -> bool:
        return self.run.proc.poll() is None

    def start(self) -> "MakeRunStack":
        return self  # started in __init__

    def start_worker(self, **options) -> None:
        raise RuntimeError(f"make run stopped by itself (status {self.run.proc.returncode}):\n{self.text()[-2000:]}")

    def thaw(self) -> None:
        pass  # never frozen: no faults on this stack

    def stop(self) -> None:
        """SIGTERM to make, as `kill -TERM`: make run stops its processes and servers (docs/development.md)."""
        if self.run.proc.poll() is None:
            os.kill(self.run.proc.pid, signal.SIGTERM)
            try:
                self.run.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        self.run.stop_leftovers()
        self._remove()


def _guarded(soak: Soak, name: str, fn, args: tuple, kwargs: dict) -> None:
    """An actor's loop; an exception in the harness itself is reported (and fails the run), never swallowed."""
    from django.db import connection

    try:
        fn(*args, **kwargs)
    except Exception:  # noqa: BLE001
        soak.errors.append(f"{name}: {traceback.format_exc()[-1500:]}")
    finally:
        connection.close()


if __name__ == "__main__":
    sys.exit(main())
