"""Profile one signed endpoint in-process: the real WSGI handler, one thread, no network, no load generator.

    uv run python bench/profile_endpoint.py pay/create --requests 500 [--cprofile 30]
    uv run python bench/profile_endpoint.py callback --requests 2000 [--cprofile 30]

`callback` profiles one callback delivery (`callback_deliver`: claim, POST, record) instead of a request: the
events are enqueued first (no task queued), the receiver is a keep-alive HTTP/1.1 server in a process of its own
(its CPU is not counted), and the PostgreSQL backend's CPU per delivery is read from /proc beside the process's.

Endpoints: the signed API (balance, pay/create, pay/query, payout/create, refund/create of parts of paid pay-ins,
the reference view) and `pay-in`, the
hosted page's sandbox Pay (POST /pay/<token>: the order paid, the credit posted, the callback enqueued).
Uses the bench settings against its own PostgreSQL database (`payments_profile`, recreated) and Redis db 5
(`--database`, `--redis`),
creates one merchant with a real RSA key, then prints per-request wall and CPU time, queries and Redis
round trips per request, and optionally the top functions of a cProfile run. Not part of make test.
"""

import argparse
import cProfile
import io
import json
import os
import pstats
import secrets
import sys
import tempfile
import time
from pathlib import Path

from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SCENARIOS = {
    "reference": ("/bench/reference", lambda run, i: {"mch_order_no": f"rf{run}{i}", "amount": 10000}),
    "balance": ("/openapi/v1/balance", lambda run, i: {"currency": "PHP"}),
    "pay/create": ("/openapi/v1/pay/create", lambda run, i: {
        "mch_order_no": f"pc{run}{i}", "product_code": "PHP_COLLECT_D1", "amount": 10000 + i % 500,
        "currency": "PHP", "subject": "bench"}),
    "pay/query": ("/openapi/v1/pay/query", None),  # the orders are created first
    "pay-in": ("/pay/", None),  # the hosted page's Pay of pre-created orders
    "refund/create": ("/openapi/v1/refund/create", None),  # parts of pre-paid orders
    "callback": (None, None),
    "payout/create": ("/openapi/v1/payout/create", lambda run, i: {
        "mch_order_no": f"po{run}{i}", "product_code": "PHP_PAYOUT", "amount": 10000, "currency": "PHP",
        "payee_name": "Juan Dela Cruz", "payee_account": f"{300000 + i}", "bank_code": "BDO"}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("endpoint", choices=sorted(SCENARIOS))
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--cprofile", type=int, default=0, help="print this many top functions (cumulative)")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="payments_profile")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/5")
    args = parser.parse_args()

    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "config.settings.bench", "DATABASE_URL": f"{args.postgres}/{args.database}",
        "REDIS_URL": args.redis, "CELERY_BROKER_URL": args.redis, "SECRET_KEY": secrets.token_urlsafe(50),
        "PLATFORM_KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(), "ALLOWED_HOSTS": "127.0.0.1",
        "API_ROOT": "http://127.0.0.1:8000", "CONN_MAX_AGE": "600", "LOG_LEVEL": "WARNING",
        "RATE_LIMIT_PER_SECOND": "1000000",
        "BENCH_REFERENCE_PUBLIC_KEY": str(Path(tempfile.mkdtemp()) / "reference_public.pem"),
    })
    from bench.run import recreate_database

    recreate_database(f"{args.postgres}/postgres", args.database)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", "--noinput", verbosity=0)
    call_command("bootstrap", verbosity=0)

    from django.core.handlers.wsgi import WSGIHandler
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.common import signing
    from apps.ledger.services import balance_adjust
    from apps.merchants.services import merchant_create

    private_key = signing.generate_private_key()
    created = merchant_create(name="Profile", public_key_pem=signing.public_key_to_pem(private_key.public_key()),
                              currencies=["PHP"])
    merchant_no, app_id = created.merchant.merchant_no, created.app.app_id
    Path(os.environ["BENCH_REFERENCE_PUBLIC_KEY"]).write_text(signing.public_key_to_pem(private_key.public_key()))
    balance_adjust(merchant_no=merchant_no, currency="PHP", amount=10**13, reason="profile top-up")

    if args.endpoint == "callback":
        return profile_callbacks(args, created.merchant)
    path, business = SCENARIOS[args.endpoint]
    run = secrets.token_hex(3)

    orders = []
    if args.endpoint in ("pay/query", "pay-in"):
        from apps.collection.services import collection_create

        merchant = created.merchant
        orders = [collection_create(merchant=merchant, mch_order_no=f"pq{run}{i}", product_code="PHP_COLLECT_D1",
                                    amount=10000 + i % 500, currency="PHP", subject="profile")
                  for i in range(args.requests + 20)]
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    if args.endpoint == "pay/query":
        business = lambda run, i: {"mch_order_no": orders[i].mch_order_no}  # noqa: E731
    if args.endpoint == "refund/create":
        from apps.collection.services import collection_create, collection_notify_paid

        paid = [collection_notify_paid(platform_order_no=collection_create(
            merchant=created.merchant, mch_order_no=f"rp{run}{i}", product_code="PHP_COLLECT_D0", amount=1_000_000,
            currency="PHP", subject="profile").platform_order_no) for i in range(min(args.requests + 20, 200))]
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        business = lambda run, i: {"platform_order_no": paid[i % len(paid)].platform_order_no,  # noqa: E731
                                   "mch_refund_no": f"rf{run}{i}", "amount": 10 + i % 50}

    def body(i: int) -> bytes:
        if args.endpoint == "pay-in":
            return orders[i].pay_token.encode()
        signed = {**business(run, i), "merchant_no": merchant_no, "app_id": app_id, "key_version": 1,
                  "timestamp": int(time.time()), "nonce": secrets.token_hex(16), "sign_type": "RSA2"}
        signed["sign"] = signing.sign(private_key, signed)
        return json.dumps(signed, separators=(",", ":")).encode()

    handler = WSGIHandler()

    csrf = secrets.token_hex(16)

    def call(raw: bytes) -> dict:
        if args.endpoint == "pay-in":
            form = f"csrfmiddlewaretoken={csrf}&action=pay".encode()
            environ = {"REQUEST_METHOD": "POST", "PATH_INFO": path + raw.decode(), "SERVER_NAME": "127.0.0.1",
                       "SERVER_PORT": "8000", "HTTP_HOST": "127.0.0.1", "HTTP_COOKIE": f"csrftoken={csrf}",
                       "CONTENT_TYPE": "application/x-www-form-urlencoded", "CONTENT_LENGTH": str(len(form)),
                       "wsgi.input": io.BytesIO(form), "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr}
            status = []
            response = handler(environ, lambda s, headers: status.append((s, dict(headers))))
            b"".join(response)
            code, headers = status[0]
            if not code.startswith("302") or "?" in headers.get("Location", ""):
                raise SystemExit(f"pay-in: {code} {headers}")
            return {}
        environ = {"REQUEST_METHOD": "POST", "PATH_INFO": path, "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000",
                   "HTTP_HOST": "127.0.0.1", "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(raw)),
                   "wsgi.input": io.BytesIO(raw), "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr}
        response = handler(environ, lambda status, headers: None)
        reply = json.loads(b"".join(response))
        if reply["code"] != "0":
            raise SystemExit(f"{args.endpoint}: {reply}")
        return reply

    bodies = [body(i) for i in range(args.requests + 20)]
    for raw in bodies[:10]:  # warm-up: imports, connections, caches
        call(raw)
    with CaptureQueriesContext(connection) as queries:
        call(bodies[10])
    statements = [q["sql"] for q in queries.captured_queries]

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend_pid = cursor.fetchone()[0]

    def backend_cpu() -> float | None:
        """CPU seconds of this connection's PostgreSQL backend so far (its /proc entry: a server on this host)."""
        try:
            fields = Path(f"/proc/{backend_pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    timed = bodies[20:]
    # PROFILE_CLOCK=cpu: count CPU time only (time blocked on PostgreSQL or Redis is then left out).
    clock = time.process_time if os.environ.get("PROFILE_CLOCK") == "cpu" else time.perf_counter
    profiler = cProfile.Profile(clock) if args.cprofile else None
    server = backend_cpu()
    wall, cpu = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    for raw in timed:
        call(raw)
    if profiler:
        profiler.disable()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    server = backend_cpu() - server if server is not None else None
    print(f"{args.endpoint}: {len(timed)} requests, {wall / len(timed) * 1000:.2f} ms wall and "
          f"{cpu / len(timed) * 1000:.2f} ms CPU per request{' (under cProfile)' if profiler else ''}, "
          f"{len(statements)} SQL statements per request"
          + (f", PostgreSQL backend {server / len(timed) * 1000:.2f} ms CPU per request" if server is not None else ""))
    for sql in statements:
        print("   ", sql[:160])
    if profiler:
        if os.environ.get("PROFILE_DUMP"):
            profiler.dump_stats(os.environ["PROFILE_DUMP"])
        pstats.Stats(profiler).sort_stats(os.environ.get("PROFILE_SORT", "cumulative")).print_stats(args.cprofile)


RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200); self.send_header("Content-Length", "7"); self.end_headers(); self.wfile.write(b"success")
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def profile_callbacks(args, merchant) -> None:
    """One thread delivering enqueued events one after another (bulkhead and lease as in a worker)."""
    import subprocess

    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from apps.callbacks import tasks
    from apps.callbacks.deliver import callback_deliver
    from apps.callbacks.enqueue import callback_enqueue
    from apps.callbacks.models import CallbackEvent

    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(receiver.stdout.readline())
        merchant.collection_callback_url = f"http://127.0.0.1:{port}/callback"
        merchant.save(update_fields=["collection_callback_url"])
        tasks.deliver_callback.delay = lambda event_id: None  # the loop below is the worker
        ids = []
        with transaction.atomic():
            for i in range(args.requests + 20):
                no = f"CBP{i:07d}"
                ids.append(callback_enqueue(merchant=merchant, type=CallbackEvent.Type.COLLECTION_SUCCESS,
                                            platform_order_no=no,
                                            payload={"platform_order_no": no, "mch_order_no": f"m{i}", "amount": 1,
                                                     "currency": "PHP", "status": "SUCCESS", "paid_at": 1,
                                                     "attach": ""}).pk)
        for event_id in ids[:10]:  # warm-up: imports, connections, caches
            callback_deliver(event_id=event_id)
        with CaptureQueriesContext(connection) as queries:
            callback_deliver(event_id=ids[10])
        statements = [q["sql"] for q in queries.captured_queries]
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = cursor.fetchone()[0]
        timed = ids[20:]
        clock = time.process_time if os.environ.get("PROFILE_CLOCK") == "cpu" else time.perf_counter
        profiler = cProfile.Profile(clock) if args.cprofile else None
        wall, cpu, pg = time.perf_counter(), time.process_time(), _cpu_seconds(backend)
        if profiler:
            profiler.enable()
        for event_id in timed:
            callback_deliver(event_id=event_id)
        if profiler:
            profiler.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        pg = _cpu_seconds(backend) - pg
        delivered = CallbackEvent.objects.filter(pk__in=timed, status=CallbackEvent.Status.DELIVERED).count()
    finally:
        receiver.terminate()
        receiver.wait()
    print(f"callback: {len(timed)} deliveries ({delivered} delivered), {wall / len(timed) * 1000:.2f} ms wall, "
          f"{cpu / len(timed) * 1000:.2f} ms CPU and {pg / len(timed) * 1000:.2f} ms PostgreSQL CPU per delivery"
          f"{' (under cProfile)' if profiler else ''}, {len(statements)} SQL statements per delivery")
    for sql in statements:
        print("   ", sql[:160])
    if profiler:
        if os.environ.get("PROFILE_DUMP"):
            profiler.dump_stats(os.environ["PROFILE_DUMP"])
        pstats.Stats(profiler).sort_stats(os.environ.get("PROFILE_SORT", "cumulative")).print_stats(args.cprofile)


if __name__ == "__main__":
    main()
