"""Callback delivery throughput of ONE Celery worker process to a local receiver (part of make bench).

The events are enqueued through the real outbox (callback_enqueue, dispatch after commit) while no worker
runs; then one worker process starts and the figure is the receiver's arrival rate from the first to the
last delivery (so worker start-up is not counted). Bounded by `events` and `timeout`.

Beside the rate, the CPU each delivery cost, from the first to the last arrival: the worker process's (all its
threads: Celery's consumer, the task threads, the watchdog) and PostgreSQL's (every backend of the database but
this process's), read from /proc. On a host shared with other work the rate moves with the load; the CPU per
event barely does, so variants are compared on it.

`backlog`: before the healthy merchants' events, that many pending events of one dead merchant (its endpoint
down: four attempts in flight, half of the rest due and waiting for a slot, half with a retry scheduled), written
with one INSERT … SELECT generate_series as tests/callbacks/test_backlog_plan.py does, then ANALYZE.
"""

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from django.db import connection, transaction

ROOT = Path(__file__).resolve().parent.parent
MERCHANTS = 20
TICKS = os.sysconf("SC_CLK_TCK")


def _enqueue(events: int, url: str) -> str:
    from apps.callbacks.enqueue import callback_enqueue
    from apps.callbacks.models import CallbackEvent
    from apps.common import signing
    from apps.merchants.services import merchant_create

    key = signing.generate_private_key()
    # A worker serves many merchants; each merchant is also capped by the bulkhead (4 in flight).
    run = secrets.token_hex(3)  # a second measurement in the same database creates merchants of its own
    merchants = [merchant_create(name=f"Bench callbacks {run} {n}", public_key_pem=signing.public_key_to_pem(key.public_key()),
                                 currencies=["PHP"], collection_callback_url=url).merchant for n in range(MERCHANTS)]
    stamp = int(time.time())
    batch = 200
    for start in range(0, events, batch):
        with transaction.atomic():
            for i in range(start, min(events, start + batch)):
                order_no = f"CB{stamp}{i:07d}"
                callback_enqueue(merchant=merchants[i % MERCHANTS], type=CallbackEvent.Type.COLLECTION_SUCCESS,
                                 platform_order_no=order_no,
                                 payload={"platform_order_no": order_no, "mch_order_no": f"m{i}", "amount": 10000,
                                          "currency": "PHP", "status": "SUCCESS", "paid_at": stamp, "attach": ""})
    return run


def _undelivered(run: str) -> int:
    """Events of this measurement (its merchants') not delivered yet, as the platform recorded them."""
    from apps.callbacks.models import CallbackEvent

    return (CallbackEvent.objects.filter(merchant__name__startswith=f"Bench callbacks {run} ")
            .exclude(status=CallbackEvent.Status.DELIVERED).count())


def _backlog(count: int) -> None:
    """`count` pending events of a merchant whose endpoint is down (a closed port), none of them queued."""
    from apps.callbacks.models import CallbackEvent
    from apps.common import signing
    from apps.merchants.services import merchant_create

    key = signing.generate_private_key()
    dead = merchant_create(name="Bench dead endpoint", public_key_pem=signing.public_key_to_pem(key.public_key()),
                           currencies=["PHP"], collection_callback_url="http://127.0.0.1:9/callback").merchant
    table = CallbackEvent._meta.db_table
    parts = [  # (how many, due, lease): waiting for a slot, retry scheduled, in flight
        (count // 2, "now() - interval '1 day' + g * interval '1 second'", "NULL"),
        (count - count // 2 - 4, "now() + interval '1 hour' + g * interval '1 second'", "NULL"),
        (4, "now() - interval '1 hour'", "now() + interval '1 day'"),
    ]
    with connection.cursor() as cursor:
        for n, (size, due, lease) in enumerate(parts):
            cursor.execute(
                f"""INSERT INTO {table} (merchant_id, type, platform_order_no, url, payload, status, attempts_count,
                        next_attempt_at, created_at, delivered_at, locked_until, dispatched_at, resend_requested,
                        last_error)
                    SELECT %s, 'collection.success', %s || g, '', '{{}}'::jsonb, 'pending', 3, {due},
                           now() - interval '2 days', NULL, {lease}, NULL, false, 'connection refused'
                      FROM generate_series(1, %s) AS g""",
                [dead.pk, f"DEAD{n}-", size])
        cursor.execute(f"ANALYZE {table}")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process, all its threads, so far (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def _database_backends() -> list[int]:
    with connection.cursor() as cursor:
        # Client backends only: an autovacuum worker (the backlog's INSERT wakes one) is not a delivery's cost.
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                       " AND backend_type = 'client backend'")
        return [row[0] for row in cursor.fetchall()]


def _profile(pid: int) -> subprocess.Popen | None:
    """BENCH_PYSPY=<file> (and BENCH_PYSPY_SECONDS, default 10): py-spy samples the worker from its first delivery on
    (`--gil`: only the thread holding the GIL, i.e. where the process's CPU goes) into <file>, collapsed stacks."""
    target = os.environ.get("BENCH_PYSPY")
    if not target:
        return None
    return subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "--gil", "-r", "250",
                             "-d", os.environ.get("BENCH_PYSPY_SECONDS", "10"), "--format", "raw", "-o", target,
                             "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def measure(*, env: dict, events: int, timeout: float, concurrency: int = 16, backlog: int = 0,
            failing_first: int = 0) -> dict:
    """`failing_first`: the receiver answers its first that many requests 500 (their events are retried on the
    schedule, docs/api.md, "Callbacks"). The result's `ok` is false when any event is left undelivered: such a run
    measured a platform that lost a callback, and its rate means nothing."""
    sys.path.insert(0, str(ROOT))
    from tests.support.receiver import CallbackReceiver, Reply

    receiver = CallbackReceiver(keep_alive=True).start()  # as most merchants' servers: HTTP/1.1, kept alive
    receiver.script(*[Reply(500, "busy")] * failing_first)
    worker = None
    cpu = {}
    workdir = Path(tempfile.mkdtemp(prefix="bench-callbacks-"))
    try:
        if backlog:
            _backlog(backlog)
        run = _enqueue(events, receiver.url)
        # The worker with its beat, as deployed: the sweeper is what queues a retry that came due and a delivery
        # whose task was lost (apps.callbacks.sweep); without it such an event waits for good.
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "threads", "--concurrency",
             str(concurrency), "--loglevel", "WARNING", "--without-heartbeat", "--without-gossip", "--without-mingle",
             "--beat", "--schedule", str(workdir / "celerybeat-schedule")],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
            # BENCH_WORKER_LOG=<file>: the worker's own log (start-up errors, failed tasks).
            stderr=open(os.environ["BENCH_WORKER_LOG"], "ab") if os.environ.get("BENCH_WORKER_LOG") else subprocess.DEVNULL,
        )
        deadline = time.time() + timeout
        while not receiver.requests and time.time() < deadline and worker.poll() is None:
            time.sleep(0.01)
        backends = _database_backends()
        profiler = _profile(worker.pid)
        first = (len(receiver.requests), _cpu_seconds(worker.pid), sum(_cpu_seconds(p) for p in backends))
        # Every event delivered as the platform recorded it (a 500 is an arrival, not a delivery).
        while time.time() < deadline and worker.poll() is None:
            if len(receiver.requests) >= events + failing_first and not _undelivered(run):
                break
            time.sleep(0.05 if len(receiver.requests) < events else 0.5)
        last = (len(receiver.requests), _cpu_seconds(worker.pid), sum(_cpu_seconds(p) for p in backends))
        counted = last[0] - first[0]
        if counted > 0:
            cpu = {"worker_cpu_ms_per_event": (last[1] - first[1]) * 1000 / counted,
                   "postgres_cpu_ms_per_event": (last[2] - first[2]) * 1000 / counted,
                   "tcp_connections": receiver.connections}
        arrivals = [r.at for r in receiver.requests[failing_first:]]
        if profiler:
            profiler.wait(timeout=60)
    finally:
        if worker:
            worker.terminate()
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
        receiver.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    undelivered = _undelivered(run)
    delivered = events - undelivered
    span = (max(arrivals) - min(arrivals)) if len(arrivals) > 1 else 0.0
    return {"events": events, "delivered": delivered, "undelivered": undelivered, "ok": undelivered == 0,
            "seconds": span, "events_per_s": (len(arrivals) - 1) / span if span else 0.0,
            "concurrency": concurrency, "merchants": MERCHANTS, "backlog": backlog, **cpu}
