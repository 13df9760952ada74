"""make bench: the platform served the production way under wrk, with correctly signed requests.

Creates a fresh PostgreSQL database, bootstraps it, creates merchants with real RSA keys and balances,
serves the app with gunicorn (production settings, DEBUG off, Redis), then for each endpoint replays
pre-signed bodies (each with a fresh nonce) at a fixed concurrency and prints requests/s, p50/p99 latency
and the error count, with each endpoint's ratio to a reference view (verify one signature, insert one row),
interleaved with each row's slices (the host's speed drifts within minutes).
Then the pay-in success path (the sandbox channel's paid notification, the hosted page's Pay, to the posted
credit) for orders of 100 merchants, directly and with PgBouncer in transaction pooling between the app and
PostgreSQL. One row sends pay/create through HAProxy to two hosts (gunicorn on 127.0.0.2 and 127.0.0.3, half the
workers each). Also measures callback delivery throughput of one worker process to a local receiver.

Every loop is bounded in count and time; all traffic stays on loopback (127.0.0.1; the two hosts on 127.0.0.2-3).
"""

import argparse
import json
import os
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---- where a row's CPU goes: /proc, summed over the row's slices -------------------------------------------
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# The kinds of process a row's CPU is told apart by (comm, as /proc/<pid>/stat gives it); gunicorn's workers run
# this interpreter's executable, so they are told by their parent instead, and HAProxy by its pid (the tests of a
# shared host run HAProxys of their own).
PROCESS_KINDS = {"postgres": "PostgreSQL", "redis-server": "Redis", "pgbouncer": "PgBouncer"}
# The row served by two hosts behind HAProxy (Bench.two_hosts_row).
TWO_HOSTS_ROW = "pay/create (two hosts behind HAProxy)"


def cpu_snapshot() -> dict:
    """CPU seconds so far: the whole machine's busy time (all cores, from /proc/stat), every process's (from
    /proc/<pid>/stat: its parent, its kind, its time) and wrk's (this process's ended children: wrk is the only
    child that ends during a row)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    busy = sum(int(v) for v in fields[:8]) - int(fields[3]) - int(fields[4])  # less idle and iowait
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    processes = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()
        processes[int(entry.name)] = (stat[stat.index("(") + 1:stat.rindex(")")], int(rest[1]),
                                      (int(rest[11]) + int(rest[12])) / CLOCK_TICKS)  # comm, ppid, utime + stime
    return {"machine": busy / CLOCK_TICKS, "wrk": children.ru_utime + children.ru_stime, "processes": processes}


def cpu_used(before: dict, after: dict, own: dict[int, str]) -> dict[str, float]:
    """CPU seconds between two snapshots: the machine's, wrk's, and per kind of process (gunicorn's masters and
    workers, PostgreSQL's processes, Redis, PgBouncer, HAProxy), counted per process alive at the second (a process
    that ended in between, say another database's backend, is missed rather than subtracted). `own`: the bench's
    processes told by pid (pid -> kind; a child of one is of its kind: gunicorn's workers)."""
    used = {"machine": after["machine"] - before["machine"], "wrk": after["wrk"] - before["wrk"], "gunicorn": 0.0}
    for pid, (comm, ppid, seconds) in after["processes"].items():
        kind = own.get(pid) or own.get(ppid) or PROCESS_KINDS.get(comm)
        if kind:
            earlier = before["processes"].get(pid)
            used[kind] = used.get(kind, 0.0) + seconds - (earlier[2] if earlier and earlier[0] == comm else 0.0)
    return used


def two_hosts_refusal(result: dict, spread: dict[str, int], made: int) -> str:
    """Why a run of the two-hosts row is refused ("" if it is not): a request answered with an error, a host that
    HAProxy sent no request (`spread`: host -> requests), or fewer orders `made` than creates answered."""
    problems = [f"{result['errors']} errors"] if result["errors"] else []
    if len(spread) != 2 or not all(spread.values()):
        problems.append(f"a host took no request ({spread})")
    answered = result["requests"] - result["errors"]
    if made < answered:
        problems.append(f"{answered} creates answered, {made} orders made")
    return "; ".join(problems)


def recreate_database(admin_url: str, name: str, template: str | None = None) -> None:
    """`name` dropped and created empty, or as a copy of an already migrated `template` (migrate then has nothing to
    do)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        drop_and_create(conn, name, template)


def drop_and_create(conn: psycopg.Connection, name: str, template: str | None = None) -> None:
    """recreate_database on a connection the caller holds (autocommit, to the server's postgres database)."""
    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))


class Bench:
    @staticmethod
    def add_environment_arguments(parser: argparse.ArgumentParser) -> None:
        """The options the environment is built from: PostgreSQL server, database to recreate, Redis db."""
        parser.add_argument("--postgres",
                            default=os.environ.get("BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432"))
        parser.add_argument("--database", default=os.environ.get("BENCH_DATABASE", "payments_bench"))
        parser.add_argument("--template", default=None,
                            help="create the database as a copy of this migrated one (make test's bench test copies "
                                 "the suite's template instead of running every migration)")
        parser.add_argument("--redis", default=os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/5"))

    def __init__(self, args):
        self.args = args
        self.workdir = Path(tempfile.mkdtemp(prefix="bench-"))
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        pg = args.postgres.rstrip("/")
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.bench",
            "DATABASE_URL": f"{pg}/{args.database}",
            "REDIS_URL": args.redis,
            "CELERY_BROKER_URL": args.redis,  # the measured broker, whatever the shell exports
            "SECRET_KEY": secrets.token_urlsafe(50),
            "PLATFORM_KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "API_ROOT": self.base,
            "CONN_MAX_AGE": "600",
            "LOG_LEVEL": "WARNING",
            "RATE_LIMIT_PER_SECOND": "1000000",
            "BENCH_REFERENCE_PUBLIC_KEY": str(self.workdir / "merchant_public.pem"),
            "STATIC_ROOT": str(self.workdir / "static"),
        }
        self.procs: list[subprocess.Popen] = []  # the one host's gunicorn
        self.host_procs: list[subprocess.Popen] = []  # the two hosts' gunicorns (two_hosts_row)
        self.haproxy_proc: subprocess.Popen | None = None
        self.pgbouncer_proc: subprocess.Popen | None = None
        self.refused: dict[str, str] = {}  # row -> why its run is refused (an error, a host that took no request)
        self.spread: dict[str, int] = {}  # requests HAProxy sent to each host during the two-hosts row
        self.results: list[dict] = []
        self.reference_runs: list[dict] = []  # every reference run's result, in order
        self.fresh_reference: float | None = None  # the last one, while nothing ran after it in the same server

    @property
    def slice_seconds(self) -> int:
        """One slice of a row (--duration over --slices); wrk takes whole seconds."""
        return max(1, round(self.args.duration / self.args.slices))

    # ---- set-up -------------------------------------------------------------------------------------
    def manage(self, *argv: str) -> str:
        out = subprocess.run([sys.executable, "manage.py", *argv], cwd=ROOT, env=self.env, check=True,
                             capture_output=True, text=True)
        return out.stdout

    def setup_database(self) -> None:
        """A fresh database, migrated and bootstrapped; Django set up in this process with the bench environment."""
        recreate_database(self.args.postgres.rstrip("/") + "/postgres", self.args.database, self.args.template)
        self.manage("migrate", "--noinput")
        self.manage("bootstrap")
        os.environ.update(self.env)
        import django

        django.setup()

    def setup_data(self) -> None:
        self.setup_database()
        self.manage("collectstatic", "--noinput", "-v0")
        from apps.common import signing
        from apps.ledger.services import balance_adjust
        from apps.merchants.services import merchant_create

        self.private_key = signing.generate_private_key()
        public_pem = signing.public_key_to_pem(self.private_key.public_key())
        (self.workdir / "merchant_public.pem").write_text(public_pem)
        if not self.args.one_channel:
            self.second_channels()
        self.merchants = []
        for i in range(self.args.merchants):
            created = merchant_create(name=f"Bench {i}", public_key_pem=public_pem, currencies=["PHP"])
            balance_adjust(merchant_no=created.merchant.merchant_no, currency="PHP", amount=10**13,
                           reason="bench top-up")
            self.merchants.append((created.merchant.merchant_no, created.app.app_id))

    @staticmethod
    def second_channels() -> None:
        """Two channels per PHP direction (docs/channels.md, "Routing"), so every create row includes the route's
        choice: payouts between two of the same priority by weight, one of which serves only some bank codes;
        pay-ins with a second, lower-priority channel behind the first."""
        from apps.channels.models import Channel

        Channel.objects.get_or_create(code="SANDBOX_PHP_PAYOUT_B", defaults={
            "name": "Sandbox PHP payouts B", "adapter": "sandbox", "direction": "payout", "currency_id": "PHP",
            "priority": 100, "weight": 100, "bank_codes": ["BDO", "BPI", "GCASH"]})
        Channel.objects.get_or_create(code="SANDBOX_PHP_PAYIN_B", defaults={
            "name": "Sandbox PHP pay-ins B", "adapter": "sandbox", "direction": "payin", "currency_id": "PHP",
            "priority": 200})

    def start_server(self, env: dict | None = None) -> None:
        """The one host: gunicorn with --workers workers on 127.0.0.1."""
        self.fresh_reference = None
        self.procs.append(self.spawn_gunicorn(self.base, self.args.workers, env or self.env))
        self.wait_gunicorn(self.base, self.args.workers)

    def spawn_gunicorn(self, base: str, workers: int, env: dict) -> subprocess.Popen:
        """gunicorn serving the app at `base` (http://address:port) with `workers` workers; wait_gunicorn waits."""
        cmd = [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", urlsplit(base).netloc,
               "--workers", str(workers), "--worker-class", self.args.worker_class,
               "--threads", str(self.args.threads),
               "--access-logfile", "-" if self.args.verbose else "/dev/null", "--log-level", "warning"]
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)

    @staticmethod
    def wait_gunicorn(base: str, workers: int) -> None:
        """Ready means every worker has loaded the app: poll until /healthz answers several times in a row."""
        import requests

        deadline, answered = time.time() + 90, 0
        while time.time() < deadline and answered < 2 * workers:
            try:
                requests.get(base + "/healthz", timeout=10)
                answered += 1
            except requests.RequestException:
                answered = 0
                time.sleep(0.2)
        if answered < 2 * workers:
            raise SystemExit(f"gunicorn did not start at {base}")

    def own_pids(self) -> dict[int, str]:
        """The gunicorn masters and the HAProxy running now, by pid (cpu_used)."""
        own = {proc.pid: "gunicorn" for proc in self.procs + self.host_procs}
        if self.haproxy_proc is not None:
            own[self.haproxy_proc.pid] = "HAProxy"
        return own

    @staticmethod
    def terminate(procs: list[subprocess.Popen]) -> None:
        """SIGTERM to each, then wait; one still running 15 s later is killed."""
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()

    def stop_server(self) -> None:
        procs, self.procs = self.procs, []
        self.terminate(procs)

    def stop(self) -> None:
        self.stop_hosts()
        self.stop_server()
        if self.pgbouncer_proc is not None:
            self.pgbouncer_proc.terminate()
            self.pgbouncer_proc.wait(timeout=15)
        shutil.rmtree(self.workdir, ignore_errors=True)

    # ---- bodies ------------------------------------------------------------------------------------
    def signed(self, merchant: tuple[str, str], business: dict) -> str:
        from apps.common import signing

        body = {**business, "merchant_no": merchant[0], "app_id": merchant[1], "key_version": 1,
                "timestamp": int(time.time()), "nonce": secrets.token_hex(16), "sign_type": "RSA2"}
        body["sign"] = signing.sign(self.private_key, body)
        return json.dumps(body, separators=(",", ":"))

    def write_bodies(self, name: str, count: int, make) -> Path:
        path = self.workdir / f"{name}.jsonl"
        with path.open("w") as handle:
            for i in range(count):
                handle.write(make(i) + "\n")
        return path

    def existing_order(self, prefix: str, i: int) -> tuple[tuple[str, str], dict]:
        """(merchant, {"mch_order_no": ...}) of the i-th order created by an earlier scenario (cycled)."""
        if not getattr(self, "_orders", None):
            from apps.collection.models import CollectionOrder

            self._apps = dict(self.merchants)
            self._orders = list(CollectionOrder.objects.filter(mch_order_no__startswith=prefix)
                                .values_list("merchant__merchant_no", "mch_order_no").order_by("id"))
        merchant_no, mch_order_no = self._orders[i % len(self._orders)]
        return (merchant_no, self._apps[merchant_no]), {"mch_order_no": mch_order_no}

    def paid_order(self, prefix: str, i: int, business: dict) -> tuple[tuple[str, str], dict]:
        """(merchant, {"platform_order_no": ..., **business}) of the i-th of --refund-orders paid pay-ins spread over
        the merchants (cycled), created and paid through the services before the row's bodies are signed: a refund body
        takes a small part of one, so an order is refunded a few times over the row and two refunds rarely meet on its
        lock."""
        if not getattr(self, "_paid", None):
            from django.db import connection

            from apps.collection.services import collection_create, collection_notify_paid
            from apps.merchants.models import Merchant

            print(f"paying {self.args.refund_orders} orders to refund ...", file=sys.stderr)
            merchants = list(Merchant.objects.filter(merchant_no__in=[m[0] for m in self.merchants]))
            apps = dict(self.merchants)
            self._paid = []
            for n in range(self.args.refund_orders):
                merchant = merchants[n % len(merchants)]
                order = collection_create(merchant=merchant, mch_order_no=f"{prefix}{n}",
                                          product_code="PHP_COLLECT_D0", amount=1_000_000, currency="PHP",
                                          subject="bench")
                collection_notify_paid(platform_order_no=order.platform_order_no)
                self._paid.append(((merchant.merchant_no, apps[merchant.merchant_no]),
                                   {"platform_order_no": order.platform_order_no}))
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")  # the orders were just written: plans must not depend on autovacuum's timing
        merchant, order = self._paid[i % len(self._paid)]
        return merchant, {**order, **business}

    def endpoint_exists(self, path: str) -> bool:
        import requests

        reply = requests.post(self.base + path, data=b"{}", timeout=5)
        return not (reply.status_code == 404 and reply.json().get("code") == "1004")

    # ---- load --------------------------------------------------------------------------------------
    def wrk(self, name: str, path: str, bodies: Path, count: int, script: str = "wrk_bodies.lua",
            script_args: tuple[str, ...] = (), more: str = "--bodies", offset: int = 0, seconds: int | None = None,
            quiet: bool = False, base: str = "") -> dict:
        """wrk replaying the bodies (or paths) of `bodies` from line `offset` on with `script` for `seconds` (a
        slice's) against `base` (the one host's unless given); `count` lines in all, `more` the option that raises it
        when a run wrapped round. `consumed`: the lines the run used (a request is built before it is answered, so
        this counts the unanswered last ones too); the next slice starts after them."""
        threads = 2
        seconds = seconds or self.slice_seconds
        cmd = ["wrk", "-t", str(threads), "-c", str(self.args.connections), "-d", f"{seconds}s",
               "--latency", "-s", str(ROOT / "bench" / script), (base or self.base) + path, "--",
               str(bodies), str(threads), str(offset), *script_args]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
        line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")), None)
        if line is None:
            raise SystemExit(f"wrk failed for {name}: {out.stdout}\n{out.stderr}")
        fields = dict(part.split("=") for part in line.split()[1:])
        requests_done = int(fields["requests"])
        consumed = int(fields["consumed"])
        result = {
            "name": name,
            "requests": requests_done,
            "seconds": int(fields["duration_us"]) / 1e6,
            "rps": requests_done / (int(fields["duration_us"]) / 1e6),
            "p50_ms": int(fields["p50_us"]) / 1000,
            "p99_ms": int(fields["p99_us"]) / 1000,
            "errors": int(fields["errors"]) + int(fields["socket_errors"]),
            "consumed": consumed,
            "short_of_bodies": more if offset + consumed > count else "",
        }
        if out.stderr.strip() and self.args.verbose:
            print(out.stderr.strip()[:600], file=sys.stderr)
        if not quiet:
            print(f"  {name:<42} {result['rps']:8.1f} req/s  p50 {result['p50_ms']:6.1f} ms  "
                  f"p99 {result['p99_ms']:6.1f} ms  errors {result['errors']}", file=sys.stderr)
        return result

    # ---- the reference, interleaved with every row -----------------------------------------------------------
    # This host's speed moves by up to a factor of two within minutes (docs/performance.md, "make bench"), more than
    # any change measured here; a ratio to one reference run made minutes before a row measured that drift. So each
    # row runs in --slices slices, each between two reference runs of the same length (reference, slice, reference,
    # slice, ..., reference), in the same server (the PgBouncer row's reference goes through PgBouncer too): the
    # row's ratio is its rate over all its slices to the mean rate of the reference runs around them, and drift
    # slower than a slice cancels out.
    def reference(self) -> float:
        """One reference run now (not a row of the table); its rate, remembered as fresh until the server restarts
        or a slice runs."""
        before = cpu_snapshot()
        result = self.wrk("reference (bracket)", "/bench/reference", self.reference_bodies, self.args.bodies,
                          quiet=True)
        result["cpu"] = cpu_used(before, cpu_snapshot(), self.own_pids())
        self.reference_runs.append(result)
        self.fresh_reference = result["rps"]
        return result["rps"]

    def sliced(self, name: str, run_slice) -> dict:
        """A row of the table: `run_slice(offset)` (one wrk run from that line of its bodies) --slices times, each
        between reference runs; requests and seconds summed over the slices, `reference_rps` the mean of the
        reference runs around them."""
        references = [self.fresh_reference or self.reference()]
        slices, offset = [], 0
        cpu: dict[str, float] = {}
        for _ in range(self.args.slices):
            before = cpu_snapshot()
            piece = run_slice(offset)
            for kind, used in cpu_used(before, cpu_snapshot(), self.own_pids()).items():
                cpu[kind] = cpu.get(kind, 0.0) + used
            offset += piece["consumed"]
            self.fresh_reference = None
            slices.append(piece)
            references.append(self.reference())
        p50s = sorted(piece["p50_ms"] for piece in slices)
        result = {
            "name": name,
            "requests": sum(piece["requests"] for piece in slices),
            "seconds": sum(piece["seconds"] for piece in slices),
            "p50_ms": p50s[len(p50s) // 2],  # the median slice's
            "p99_ms": max(piece["p99_ms"] for piece in slices),  # the worst slice's
            "errors": sum(piece["errors"] for piece in slices),
            "consumed": offset,
            "short_of_bodies": next((piece["short_of_bodies"] for piece in slices if piece["short_of_bodies"]), ""),
            "reference_rps": sum(references) / len(references),
            "reference_range": (min(references), max(references)),
        }
        result["rps"] = result["requests"] / result["seconds"]
        # CPU ms per answered request, by kind of process, and how busy the machine's cores were meanwhile
        result["cpu_ms"] = {kind: 1000 * used / max(result["requests"], 1) for kind, used in cpu.items()}
        result["busy"] = cpu.get("machine", 0.0) / (result["seconds"] * os.cpu_count())
        self.results.append(result)
        print(f"  {name:<42} {result['rps']:8.1f} req/s  p50 {result['p50_ms']:6.1f} ms  "
              f"p99 {result['p99_ms']:6.1f} ms  errors {result['errors']}  ratio "
              f"{result['rps'] / result['reference_rps']:.2f} (reference {min(references):.0f}-"
              f"{max(references):.0f} req/s over {len(references)} runs)", file=sys.stderr)
        return result

    def bracketed(self, measure) -> dict:
        """`measure()` (a row that cannot be sliced: the callback worker drains a fixed set of events), with
        `reference_rps`: the mean of the reference runs right before and right after it."""
        before = self.fresh_reference or self.reference()
        result = measure()
        self.fresh_reference = None
        result["reference_rps"] = (before + self.reference()) / 2
        return result

    def run_http(self) -> None:
        n = self.args.bodies
        hot = self.merchants[0]
        spread = self.merchants
        run_id = secrets.token_hex(3)

        def pay_create(prefix: str, i: int) -> str:
            return self.signed(spread[i % len(spread)], {
                "mch_order_no": f"{prefix}{i}", "product_code": "PHP_COLLECT_D1", "amount": 10000 + i % 500,
                "currency": "PHP", "subject": "bench"})

        scenarios = [
            ("reference (verify + insert)", "/bench/reference", lambda i: self.signed(spread[i % len(spread)], {})),
            ("balance", "/openapi/v1/balance", lambda i: self.signed(spread[i % len(spread)], {"currency": "PHP"})),
        ]
        if self.endpoint_exists("/openapi/v1/pay/create"):
            scenarios += [
                ("pay/create (many merchants)", "/openapi/v1/pay/create", lambda i: pay_create(f"bc{run_id}", i)),
                (TWO_HOSTS_ROW, "/openapi/v1/pay/create", lambda i: pay_create(f"bx{run_id}", i)),
                ("pay/create (one hot merchant)", "/openapi/v1/pay/create", lambda i: self.signed(
                    hot, {"mch_order_no": f"bh{run_id}{i}", "product_code": "PHP_COLLECT_D1",
                          "amount": 10000 + i % 500, "currency": "PHP"})),
                ("pay/query", "/openapi/v1/pay/query", lambda i: self.signed(
                    *self.existing_order(f"bc{run_id}", i))),
            ]
        if self.endpoint_exists("/openapi/v1/refund/create"):
            scenarios += [
                ("refund/create", "/openapi/v1/refund/create", lambda i: self.signed(
                    *self.paid_order(f"rf{run_id}", i, {"mch_refund_no": f"rf{run_id}r{i}", "amount": 10 + i % 50,
                                                        "reason": "bench"}))),
            ]
        if self.endpoint_exists("/openapi/v1/payout/create"):
            scenarios += [
                ("payout/create (many merchants)", "/openapi/v1/payout/create", lambda i: self.signed(
                    spread[i % len(spread)], {"mch_order_no": f"pc{run_id}{i}", "product_code": "PHP_PAYOUT",
                                              "amount": 10000, "currency": "PHP", "payee_name": "Juan Dela Cruz",
                                              "payee_account": f"{100000 + i}", "bank_code": "BDO"})),
                ("payout/create (one hot merchant)", "/openapi/v1/payout/create", lambda i: self.signed(
                    hot, {"mch_order_no": f"ph{run_id}{i}", "product_code": "PHP_PAYOUT", "amount": 10000,
                          "currency": "PHP", "payee_name": "Juan Dela Cruz", "payee_account": f"{200000 + i}",
                          "bank_code": "BDO"})),
            ]
        print(f"signing {n} bodies per endpoint ...", file=sys.stderr)
        wanted = [w.strip() for w in self.args.only.split(",") if w.strip()]
        (_, _, make_reference), *rows = scenarios
        self.reference_bodies = self.write_bodies("reference", n, make_reference)
        for name, path, make in rows:
            if wanted and not any(name.startswith(w) for w in wanted):
                continue
            bodies = self.write_bodies(name.split()[0].replace("/", "_"), n, make)
            if name == TWO_HOSTS_ROW:
                self.two_hosts_row(name, path, bodies, n, prefix=f"bx{run_id}")
            else:
                self.sliced(name, lambda offset: self.wrk(name, path, bodies, n, offset=offset))  # noqa: B023
        if not self.reference_runs:
            self.reference()
        if not wanted or any("pay-in success".startswith(w) for w in wanted):
            self.run_payin()

    # ---- two hosts behind HAProxy ----------------------------------------------------------------------------
    def start_hosts(self):
        """Two hosts as docs/deployment.md's "Several hosts" runs them, less their Celery worker and beat (this row
        measures the web tier): gunicorn on 127.0.0.2 and 127.0.0.3 with half of --workers each (rounded down), so
        that both together have the one host's workers, and Debian's HAProxy on 127.0.0.1 in front of them
        (tests/support/haproxy.py), balancing as deploy/compose/haproxy.cfg does: least connections, /healthz every 2 s.
        Both hosts reach PostgreSQL directly, as the one host does: PgBouncer's cost is its own row's. Ended by
        stop_hosts()."""
        from tests.support.haproxy import HAProxy

        per_host = max(1, self.args.workers // 2)
        bases = [f"http://127.0.0.{2 + i}:{free_port()}" for i in range(2)]
        proxy = HAProxy(self.workdir, [(urlsplit(base).hostname, urlsplit(base).port) for base in bases],
                        balance="leastconn", check_interval="2s")
        env = {**self.env, "API_ROOT": proxy.base, "BEHIND_PROXY": "true",
               "ALLOWED_HOSTS": "127.0.0.1,127.0.0.2,127.0.0.3,localhost"}
        self.host_procs += [self.spawn_gunicorn(base, per_host, env) for base in bases]
        for base in bases:
            self.wait_gunicorn(base, per_host)
        with (self.workdir / "haproxy.log").open("ab") as log:
            self.haproxy_proc = subprocess.Popen(proxy.argv(), stdout=log, stderr=subprocess.STDOUT,
                                                 start_new_session=True)
        deadline = time.time() + 30
        while not proxy.all_up():
            if self.haproxy_proc.poll() is not None or time.time() > deadline:
                log = (self.workdir / "haproxy.log").read_text()
                raise SystemExit(f"HAProxy did not put both hosts in rotation:\n{log}")
            time.sleep(0.2)
        return proxy

    def stop_hosts(self) -> None:
        procs, self.host_procs = self.host_procs, []
        if self.haproxy_proc is not None:
            procs.append(self.haproxy_proc)
            self.haproxy_proc = None
        self.terminate(procs)

    def two_hosts_row(self, name: str, path: str, bodies: Path, count: int, *, prefix: str) -> None:
        """The row through HAProxy to the two hosts, sliced against the one host's reference view like every other
        row. Both hosts share this machine's cores, so on 2 cores the row measures what the proxy and a second host
        cost a request, not the speed-up hosts on cores of their own give. Refused if a request failed, a host took
        none, or an answered create made no order."""
        from apps.collection.models import CollectionOrder

        proxy = self.start_hosts()
        self.fresh_reference = None  # taken before the hosts booted: the first slice gets a reference right before it
        try:
            result = self.sliced(name, lambda offset: self.wrk(name, path, bodies, count, offset=offset,
                                                                base=proxy.base))
            self.spread = {host: int(row["stot"]) for host, row in proxy.servers().items()}
        finally:
            self.stop_hosts()
        made = CollectionOrder.objects.filter(mch_order_no__startswith=prefix).count()
        print(f"  {'':42} requests HAProxy sent per host: "
              + ", ".join(f"{host} {sent}" for host, sent in self.spread.items()), file=sys.stderr)
        refusal = two_hosts_refusal(result, self.spread, made)
        if refusal:
            self.refused[name] = refusal

    # ---- pay-in success: the channel's paid notification ---------------------------------------------------
    def run_payin(self) -> None:
        """The sandbox Pay of the hosted page for orders of --payin-merchants merchants, each order paid once:
        collection_notify_paid (order locked, SUCCESS, credit posted, callback enqueued) and the callback's dispatch
        after commit. Then the same with the app's every connection going through PgBouncer in transaction
        pooling (DATABASE_POOLER=pgbouncer-transaction), one server connection per gunicorn worker."""
        n = self.args.payin_orders
        merchants = self.payin_merchants()
        self.wrk_pay(f"pay-in success ({len(merchants)} merchants)", n)

        bouncer = self.start_pgbouncer()
        self.stop_server()
        self.start_server({**self.env, "DATABASE_URL": bouncer.url(), "DATABASE_POOLER": "pgbouncer-transaction"})
        before = bouncer.stats()["total_xact_count"]
        self.wrk_pay(f"pay-in success ({len(merchants)} merchants, PgBouncer)", n)
        carried = bouncer.stats()["total_xact_count"] - before
        print(f"  {'':42} {carried} transactions through PgBouncer "
              f"({len(bouncer.clients())} client connections)", file=sys.stderr)
        if not carried:
            raise SystemExit("PgBouncer carried no transaction: the server did not use it")

    def start_pgbouncer(self):
        """PgBouncer in transaction pooling in front of the bench database (tests/pgbouncer/server.py), as many
        server connections as gunicorn has workers; ended by stop()."""
        from tests.pgbouncer.server import PgBouncer

        server = urlsplit(self.args.postgres)
        bouncer = PgBouncer(self.workdir, database=self.args.database, user=server.username or "postgres",
                            server_host=server.hostname or "127.0.0.1", server_port=server.port or 5432,
                            pool_size=self.args.workers)
        with (self.workdir / "pgbouncer.log").open("ab") as log:
            self.pgbouncer_proc = subprocess.Popen(bouncer.argv(), stdout=log, stderr=subprocess.STDOUT,
                                                   start_new_session=True)
        bouncer.wait_ready(self.pgbouncer_proc)
        return bouncer

    def payin_merchants(self) -> list:
        if not getattr(self, "_payin_merchants", None):
            from apps.common import signing
            from apps.merchants.services import merchant_create

            public_pem = signing.public_key_to_pem(self.private_key.public_key())
            self._payin_merchants = [
                merchant_create(name=f"Bench pay-in {i}", public_key_pem=public_pem, currencies=["PHP"]).merchant
                for i in range(self.args.payin_merchants)]
        return self._payin_merchants

    def wrk_pay(self, name: str, count: int) -> dict:
        """`count` new orders, spread over the pay-in merchants and created through the create service, then their
        hosted pages' Pay under wrk (bench/wrk_pay_page.lua), a row of slices; every answered Pay must have paid its
        order."""
        from django.db import connection

        from apps.collection.models import CollectionOrder
        from apps.collection.services import collection_create

        merchants = self.payin_merchants()
        prefix = f"pi{secrets.token_hex(3)}"
        paths = self.workdir / f"{prefix}.paths"
        with paths.open("w") as handle:
            for i in range(count):
                order = collection_create(merchant=merchants[i % len(merchants)], mch_order_no=f"{prefix}{i}",
                                          product_code="PHP_COLLECT_D1", amount=10000 + i % 500, currency="PHP",
                                          subject="bench")
                handle.write(urlsplit(order.pay_url).path + "\n")
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # the orders were just written: plans must not depend on autovacuum's timing
        # The hosted page's CSRF check: a cookie and a form field carrying the same secret (a browser gets both
        # from the page's GET, which is not part of the paid notification measured here).
        csrf = secrets.token_hex(16)
        result = self.sliced(name, lambda offset: self.wrk(name, "/pay/", paths, count, script="wrk_pay_page.lua",
                                                            script_args=(csrf,), more="--payin-orders",
                                                            offset=offset))
        paid = CollectionOrder.objects.filter(mch_order_no__startswith=prefix,
                                              status=CollectionOrder.Status.SUCCESS).count()
        answered = result["requests"] - result["errors"]
        if paid < min(answered, count):
            raise SystemExit(f"{name}: {answered} Pay answered as paid, {paid} orders paid")
        return result

    # ---- callbacks ---------------------------------------------------------------------------------
    def run_callbacks(self) -> dict | None:
        """Each callback row `--callback-runs` times (default 3), the empty-backlog runs first, then the backlog's
        (its 100,000 events written once, before the first of them, and left pending for the others). One 15-s run
        cannot hold the backlog row's 10 % bound on this host (2026-11-26: 0.78, then 0.91 and 1.05 for the same
        code), so every run is bracketed by reference runs and each row reports its median run by ratio to them."""
        try:
            import bench.callback_throughput  # noqa: F401
        except ImportError:
            return None

        rows = [("empty backlog", 0)]
        if self.args.callback_backlog:
            rows.append((f"{self.args.callback_backlog:,} dead events pending", self.args.callback_backlog))
        results = {}
        for name, backlog in rows:
            runs = []
            for run in range(self.args.callback_runs):
                # The reference around each run is served directly (not through the PgBouncer of the row before);
                # the web server stops while the worker is measured (measure_callbacks) and starts again after.
                self.stop_server()
                self.start_server()

                def measure(write=backlog if run == 0 else 0):
                    result = self.measure_callbacks(events=self.args.callback_events, timeout=120, backlog=write)
                    self.start_server()
                    return result

                result = self.bracketed(measure)
                result["ratio"] = result["events_per_s"] / result["reference_rps"]
                runs.append(result)
                print(f"  {'callback delivery (1 worker, ' + name + ')':<42} {result['events_per_s']:8.1f} events/s "
                      f"ratio {result['ratio']:.2f} (run {run + 1} of {self.args.callback_runs}; "
                      f"{result['delivered']}/{result['events']} delivered, worker "
                      f"{result.get('worker_cpu_ms_per_event', 0):.2f} ms CPU/event, PostgreSQL "
                      f"{result.get('postgres_cpu_ms_per_event', 0):.2f} ms CPU/event)"
                      + ("" if result["ok"] else f" FAILED: {result['undelivered']} undelivered"), file=sys.stderr)
            median = sorted(runs, key=lambda r: r["ratio"])[len(runs) // 2]
            # A run that left an event undelivered fails its row, whatever the other runs' rates.
            results[name] = {**median, "runs": runs, "ok": all(r["ok"] for r in runs)}
        return results

    def measure_callbacks(self, *, events: int, timeout: float, concurrency: int = 16, backlog: int = 0) -> dict:
        """Callback delivery throughput of one worker process (bench/callback_throughput.py) on an empty broker."""
        import redis

        from bench.callback_throughput import measure

        # The HTTP scenarios left payout submission work queued on this broker (no worker ran meanwhile), and an
        # earlier run may have left messages naming events of a dropped database; neither is this callback
        # delivery, so the worker measured here starts on an empty queue. The web server stops first: its last
        # payout creates wake the submission scan up to PAYOUT_SUBMISSIONS_WAKE_DELAY after they commit, and a
        # wake sent after the flush had the measured worker submit thousands of payouts beside the callbacks.
        self.stop_server()
        redis.Redis.from_url(self.args.redis).flushdb()  # the broker too: CELERY_BROKER_URL is REDIS_URL here
        return measure(env=self.env, events=events, timeout=timeout, concurrency=concurrency, backlog=backlog)

    # ---- report ------------------------------------------------------------------------------------
    def report(self, callbacks: dict | None) -> None:
        """The table; callback rows in events/s, with their ratio to the reference view's req/s (floor 0.3) and the
        backlog row's ratio to the empty one (floor 0.9: within 10 %)."""
        print()
        print(f"make bench  {time.strftime('%Y-%m-%d %H:%M %Z')}  concurrency {self.args.connections}, "
              f"{self.args.slices} x {self.slice_seconds}s per endpoint, "
              f"gunicorn {self.args.workers}x{self.args.threads} {self.args.worker_class}, "
              f"{os.cpu_count()} cores")
        runs = sorted(self.reference_runs, key=lambda r: r["rps"])
        print(f"Each row ran in {self.args.slices} slices, each between two runs of the reference view; its ratio is "
              "to the mean of those runs (the last column; a callback row: the runs right before and after it). The "
              f"reference's own rate moved between {runs[0]['rps']:.1f} and {runs[-1]['rps']:.1f} req/s over "
              f"{len(runs)} runs (its row: the median run).")
        print("| endpoint | req/s | p50 ms | p99 ms | errors | ratio to reference | reference req/s |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        median = {**runs[len(runs) // 2], "name": "reference (verify + insert)", "short_of_bodies": ""}
        median["reference_rps"] = median["rps"]
        for r in [median, *self.results]:
            flag = f" (bodies wrapped: raise {r['short_of_bodies']})" if r["short_of_bodies"] else ""
            failed = f" **FAILED: {self.refused[r['name']]}**" if r["name"] in self.refused else ""
            print(f"| {r['name']}{failed} | {r['rps']:.1f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['errors']} | "
                  f"{r['rps'] / r['reference_rps']:.2f}{flag} | {r['reference_rps']:.1f} |")
        self.report_two_hosts()
        self.report_cpu()
        for name, result in (callbacks or {}).items():
            ratios = ", ".join(f"{run['ratio']:.2f}" for run in result["runs"])
            failed = "" if result["ok"] else " **FAILED: an event was left undelivered**"
            print(f"| callback delivery, 1 worker, {name} (median of {len(result['runs'])} runs){failed} | "
                  f"{result['events_per_s']:.1f} events/s | | | "
                  f"{sum(r['undelivered'] for r in result['runs'])} undelivered | "
                  f"{result['ratio']:.2f} (runs: {ratios}) | {result['reference_rps']:.1f} |")
        rates = list((callbacks or {}).values())
        if len(rates) == 2 and rates[0]["ratio"]:
            # Each run against the reference runs around it, so the host's drift between the rows cancels out.
            print(f"callback delivery with the backlog / without (median ratios to the reference): "
                  f"{rates[1]['ratio'] / rates[0]['ratio']:.2f} (floor 0.90); "
                  f"without the backlog / reference: {rates[0]['ratio']:.2f} (floor 0.30)")
        for name, result in (callbacks or {}).items():
            if "worker_cpu_ms_per_event" in result:
                print(f"callback delivery, {name}: worker {result['worker_cpu_ms_per_event']:.2f} ms CPU/event, "
                      f"PostgreSQL {result['postgres_cpu_ms_per_event']:.2f} ms CPU/event, "
                      f"{result['tcp_connections']} TCP connections for {result['delivered']} deliveries")


    def report_two_hosts(self) -> None:
        """The two-hosts row beside the one-host row of the same bodies: on one machine the two hosts share its cores,
        so this is what the proxy and the second host cost, not a speed-up."""
        rows = {r["name"]: r["rps"] / r["reference_rps"] for r in self.results}
        if TWO_HOSTS_ROW not in rows:
            return
        line = (f"{TWO_HOSTS_ROW}: two hosts of {self.args.workers // 2 or 1} gunicorn workers each, sharing "
                f"this machine's {os.cpu_count()} cores (a cost, not a speed-up); requests per host "
                + ", ".join(str(sent) for sent in self.spread.values()))
        if "pay/create (many merchants)" in rows:
            line += (f"; its ratio / the one host's pay/create (many merchants): "
                     f"{rows[TWO_HOSTS_ROW] / rows['pay/create (many merchants)']:.2f}")
        print(line)

    def report_cpu(self) -> None:
        """Where each row's CPU went: ms per answered request by kind of process (from /proc, over the row's
        slices), the rest of the machine's busy time (the kernel's network stack, everything else), and how busy
        its cores were: a row at ~100 % is bound by CPU, one well under it by waiting (locks, fsync)."""
        kinds = ["gunicorn", "PostgreSQL", "Redis", "wrk", "PgBouncer", "HAProxy"]
        print()
        print("CPU ms per answered request, by process (the sum over the row's slices, from /proc):")
        print("| endpoint | " + " | ".join(kinds) + " | rest of the machine | all | cores busy |")
        print("|---|" + "---:|" * (len(kinds) + 3))
        runs = self.reference_runs
        cpu = {kind: sum(run["cpu"].get(kind, 0.0) for run in runs) for kind in set().union(*(r["cpu"] for r in runs))}
        requests_done, seconds = sum(run["requests"] for run in runs), sum(run["seconds"] for run in runs)
        reference = {"name": f"reference (all {len(runs)} runs)",
                     "busy": cpu.get("machine", 0.0) / (seconds * os.cpu_count()),
                     "cpu_ms": {kind: 1000 * used / max(requests_done, 1) for kind, used in cpu.items()}}
        for r in [reference, *self.results]:
            cpu = r.get("cpu_ms")
            if not cpu:
                continue
            named = sum(cpu.get(kind, 0.0) for kind in kinds)
            print(f"| {r['name']} | " + " | ".join(f"{cpu.get(kind, 0.0):.2f}" for kind in kinds)
                  + f" | {cpu['machine'] - named:.2f} | {cpu['machine']:.2f} | {100 * r['busy']:.0f} % |")
        print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    Bench.add_environment_arguments(parser)
    parser.add_argument("--duration", type=int, default=10,
                        help="seconds of load per row, in --slices slices of whole seconds")
    parser.add_argument("--slices", type=int, default=5,
                        help="slices per row, each between two reference runs of the same length")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    # sync, as the Dockerfile and docker-compose serve it: each request is accepted by whichever worker is free
    # (no keep-alive pinning a connection to a busy worker).
    parser.add_argument("--worker-class", default="sync")
    parser.add_argument("--only", default="", help="comma-separated endpoint names to run (reference always runs)")
    parser.add_argument("--merchants", type=int, default=20)
    parser.add_argument("--payin-merchants", type=int, default=100, help="merchants of the pay-in success rows")
    parser.add_argument("--payin-orders", type=int, default=12000,
                        help="orders created (and paid) per pay-in row: more than a row pays at 1,000 Pays/s")
    parser.add_argument("--bodies", type=int, default=15000)
    parser.add_argument("--refund-orders", type=int, default=2000,
                        help="paid pay-ins the refund/create row refunds in parts (each body a part of one)")
    parser.add_argument("--callback-events", type=int, default=2000)
    parser.add_argument("--callback-backlog", type=int, default=100_000,
                        help="pending events of a dead merchant in the second callback row (0: no such row)")
    parser.add_argument("--callback-runs", type=int, default=3,
                        help="runs of each callback row (the empty-backlog runs first); each row reports its median")
    parser.add_argument("--skip-callbacks", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--one-channel", action="store_true",
                        help="one channel per PHP direction, as before routing (docs/channels.md, 'Routing')")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (make bench installs it with apt)")
    from tests.support.haproxy import HAPROXY

    if not Path(HAPROXY).exists():
        raise SystemExit("haproxy is not installed (make bench installs it with apt)")
    bench = Bench(args)
    try:
        print("setting up database and merchants ...", file=sys.stderr)
        bench.setup_data()
        bench.start_server()
        bench.run_http()
        callbacks = None if args.skip_callbacks else bench.run_callbacks()
        bench.report(callbacks)
    finally:
        bench.stop()
    failed = [name for name, result in (callbacks or {}).items() if not result["ok"]]
    if failed:
        raise SystemExit(f"callback rows that left an event undelivered: {', '.join(failed)}")
    if bench.refused:
        raise SystemExit("refused rows: " + "; ".join(f"{name}: {why}" for name, why in bench.refused.items()))


if __name__ == "__main__":
    main()
