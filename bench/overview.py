"""The operations overview on a database with a million orders (docs/performance.md).

    uv run python -m bench.overview [--orders 1000000] [--payouts 200000] [--runs 20] [--keep]

Recreates a PostgreSQL database (--database, default payments_overview_bench), migrates and bootstraps it, creates
20 merchants through the services, then fills it with bulk SQL (generate_series): `--orders` pay-in orders and
`--payouts` payouts (with their holds) spread over the last 30 days, about one in 200 payouts in review, some
D1 credits awaiting release, callbacks pending and dead. Then VACUUM ANALYZE (as autovacuum would have done) and
the timing: the overview page through Django's test client as a superuser (the whole request: the queries, the
template, the SVG), `--runs` times after one warm-up, printing min / median / max, and the figures' query plans.
Synthetic rows are inserted with triggers off (session_replication_role = replica): the ledger is not balanced
here and verify_ledger is not meant to pass on this database. Bounded: one fill, `--runs` requests.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.run import recreate_database  # after the checkout is on the path

MERCHANTS = 20
DAYS = 30


def fill(*, orders: int, payouts: int) -> None:
    from django.core.management import call_command
    from django.db import connection

    from apps.common import signing
    from apps.merchants.models import Product
    from apps.merchants.services import merchant_create

    call_command("bootstrap", stdout=open(os.devnull, "w"))
    key = signing.generate_private_key()
    pem = signing.public_key_to_pem(key.public_key())
    ids = [merchant_create(name=f"Overview bench {n}", public_key_pem=pem, currencies=["PHP", "USD"]).merchant.pk
           for n in range(MERCHANTS)]
    d0 = Product.objects.get(code="PHP_COLLECT_D0")
    d1 = Product.objects.get(code="PHP_COLLECT_D1")
    payout_product = Product.objects.get(code="PHP_PAYOUT")
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM channels_channel WHERE currency_id = 'PHP' AND direction = 'payin' LIMIT 1")
        collect_channel = cursor.fetchone()[0]
        cursor.execute("SELECT id FROM channels_channel WHERE currency_id = 'PHP' AND direction = 'payout' LIMIT 1")
        payout_channel = cursor.fetchone()[0]
        cursor.execute("SET session_replication_role = replica")  # synthetic rows: no ledger triggers
        started = time.perf_counter()
        # Pay-ins: 75 % paid (a fifth of those D1, released after a day), 15 % expired, 10 % still open.
        cursor.execute(f"""
            INSERT INTO collection_collectionorder
                (platform_order_no, mch_order_no, settlement, amount, fee, subject, return_url, attach,
                 expire_seconds, status, expire_at, paid_at, settled_at, pay_token, upstream_reference,
                 created_at, updated_at, channel_id, currency_id, merchant_id, product_id)
            SELECT 'PB' || g, 'm' || g, CASE WHEN g %% 5 = 0 THEN 'D1' ELSE 'D0' END, 10000 + (g %% 997) * 100, 0,
                   '', '', '', 1800,
                   CASE WHEN g %% 20 < 15 THEN 'SUCCESS' WHEN g %% 20 < 18 THEN 'EXPIRED' ELSE 'CREATED' END,
                   t + interval '30 minutes',
                   CASE WHEN g %% 20 < 15 THEN t + interval '1 minute' END,
                   CASE WHEN g %% 20 < 15 AND g %% 5 = 0 AND t < now() - interval '1 day'
                        THEN t + interval '1 day' END,
                   md5(g::text), '', t, t, %(channel)s, 'PHP', (%(merchants)s)[1 + g %% %(n)s],
                   CASE WHEN g %% 5 = 0 THEN %(d1)s ELSE %(d0)s END
            FROM (SELECT g, now() - (random() * interval '{DAYS} days') AS t
                  FROM generate_series(1, %(orders)s) AS g) AS s
        """, {"channel": collect_channel, "merchants": ids, "n": MERCHANTS, "d0": d0.pk, "d1": d1.pk,
              "orders": orders})
        # Payouts, each with its posting and hold (not balanced: a bench of reads only).
        cursor.execute("""
            INSERT INTO ledger_posting (kind, cause, memo, created_at, currency_id, merchant_id)
            SELECT 'hold.place', 'BP' || g, '', now(), 'PHP', (%(merchants)s)[1 + g %% %(n)s]
            FROM generate_series(1, %(payouts)s) AS g
        """, {"merchants": ids, "n": MERCHANTS, "payouts": payouts})
        cursor.execute("""
            INSERT INTO ledger_hold (amount, cause, status, created_at, currency_id, merchant_id, placed_by_id)
            SELECT 1, p.cause, 'held', now(), 'PHP', p.merchant_id, p.id FROM ledger_posting p WHERE p.cause LIKE 'BP%%'
        """)
        cursor.execute("""
            INSERT INTO payout_payout
                (platform_order_no, mch_order_no, amount, fee, payee_name, payee_account, bank_code, attach, status,
                 review_required, risk_reasons, review_reason, upstream_reference, fail_reason, created_at,
                 updated_at, channel_id, currency_id, hold_id, merchant_id, product_id, approvals_required)
            SELECT h.cause, h.cause, 20000 + (h.id %% 991) * 100, 1000, 'Bench payee', '00' || (h.id %% 50000),
                   'BDO', '',
                   CASE WHEN h.id %% 200 = 0 THEN 'FROZEN' WHEN h.id %% 20 = 1 THEN 'FAILED' ELSE 'SUCCESS' END,
                   h.id %% 200 = 0, '[]', '', '', '', t, t, %(channel)s, 'PHP', h.id, h.merchant_id, %(product)s, 1
            FROM (SELECT h.*, now() - (random() * interval '%(days)s days') AS t FROM ledger_hold h
                  WHERE h.cause LIKE 'BP%%') AS h
        """.replace("'%(days)s days'", f"'{DAYS} days'"), {"channel": payout_channel, "product": payout_product.pk})
        # A finished payout's hold is resolved (settled or released) by its own posting, as the services leave it:
        # the stuck-order count "finished with its funds still frozen" reads the open holds only.
        cursor.execute("""
            INSERT INTO ledger_posting (kind, cause, memo, created_at, currency_id, merchant_id)
            SELECT 'hold.settle', p.platform_order_no, '', now(), 'PHP', p.merchant_id
            FROM payout_payout p WHERE p.status <> 'FROZEN' AND p.platform_order_no LIKE 'BP%%'
        """)
        cursor.execute("""
            UPDATE ledger_hold h SET status = CASE WHEN p.status = 'SUCCESS' THEN 'settled' ELSE 'released' END,
                                     resolved_by_id = r.id, resolved_at = now()
            FROM payout_payout p JOIN ledger_posting r ON r.cause = p.platform_order_no AND r.kind = 'hold.settle'
            WHERE p.hold_id = h.id AND p.status <> 'FROZEN'
        """)
        cursor.execute("""
            INSERT INTO callbacks_callbackevent (merchant_id, type, platform_order_no, url, payload, status,
                                                 attempts_count, next_attempt_at, created_at, last_error,
                                                 resend_requested)
            SELECT (%(merchants)s)[1 + g %% %(n)s], 'collection.success', 'PB' || g, 'http://127.0.0.1/', '{}',
                   CASE WHEN g %% 10 = 0 THEN 'dead' WHEN g %% 10 = 1 THEN 'pending' ELSE 'delivered' END,
                   1, CASE WHEN g %% 10 = 1 THEN now() - interval '1 minute' END, now(), '', false
            FROM generate_series(1, %(events)s) AS g
        """, {"merchants": ids, "n": MERCHANTS, "events": orders // 10})
        cursor.execute("SET session_replication_role = DEFAULT")
        print(f"filled {orders} pay-ins, {payouts} payouts, {orders // 10} callback events "
              f"in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    connection.close()


def vacuum(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def measure(runs: int) -> list[float]:
    from django.contrib.auth.models import User
    from django.test import Client
    from django_otp import DEVICE_ID_SESSION_KEY
    from django_otp.plugins.otp_totp.models import TOTPDevice

    user = User.objects.filter(username="overview-bench").first() or User.objects.create_superuser(
        "overview-bench", password="x")
    # The admin needs a verified second factor (docs/staff-access.md): the session says which device verified it.
    device, _ = TOTPDevice.objects.get_or_create(user=user, confirmed=True, defaults={"name": "bench"})
    client = Client()
    client.force_login(user)
    session = client.session
    session[DEVICE_ID_SESSION_KEY] = device.persistent_id
    session.save()
    response = client.get("/admin/operations/operationsoverview/")  # warm-up: template and connection
    assert response.status_code == 200, response.status_code
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get("/admin/operations/operationsoverview/")
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    return timings


def plans() -> None:
    """EXPLAIN ANALYZE of each figure's query, as the overview runs it."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.operations.selectors import operations_overview

    with CaptureQueriesContext(connection) as captured:
        operations_overview()
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS OFF, TIMING OFF, SUMMARY ON) " + query["sql"])
            lines = [row[0] for row in cursor.fetchall()]
            print(f"-- {query['sql'][:110]}")
            print("   " + "\n   ".join(line for line in lines if "Scan" in line or "Execution" in line))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", default=os.environ.get("BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432"))
    parser.add_argument("--database", default="payments_overview_bench")
    parser.add_argument("--redis", default=os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/5"))
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--payouts", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--reuse", action="store_true", help="measure the database filled by an earlier run")
    args = parser.parse_args()

    url = f"{args.postgres}/{args.database}"
    os.environ["DATABASE_URL"] = url
    os.environ["REDIS_URL"] = args.redis
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")  # in-process client, fast hashing
    if not args.reuse:
        recreate_database(f"{args.postgres}/postgres", args.database)
    import django

    django.setup()
    from django.core.management import call_command

    if not args.reuse:
        call_command("migrate", verbosity=0)
        fill(orders=args.orders, payouts=args.payouts)
        vacuum(url)
    timings = measure(args.runs)
    plans()
    print(f"operations overview, {args.orders} pay-ins + {args.payouts} payouts: "
          f"min {min(timings):.1f} ms, median {statistics.median(timings):.1f} ms, max {max(timings):.1f} ms "
          f"({args.runs} requests)")


if __name__ == "__main__":
    main()
