"""Money moves with PgBouncer in transaction pooling between the platform and PostgreSQL: real gunicorn and Celery
processes whose every connection goes through PgBouncer, a merchant's signed requests over HTTP, the sandbox channel,
callbacks to a real receiver, balances, and the ledger's invariants checked through PgBouncer too."""

import io
import json
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.management import call_command

from apps.collection.models import CollectionOrder
from apps.payout.models import Payout
from tests.callbacks.merchant_side import merchant_verifies
from tests.conftest import make_merchant
from tests.faults.conftest import api_post, pay_create_ok, pay_through_page, payout_create_ok
from tests.pgbouncer.conftest import WEB, WORKER

pytestmark = pytest.mark.django_db(transaction=True)

PAYOUTS = 5  # the velocity rule reviews a sixth payout to one payee account within 24 h


def balance(platform, ctx) -> dict:
    status, body = api_post(platform.base, ctx, "balance", {"currency": "PHP"})
    assert (status, body["code"]) == (200, "0"), body
    return body["data"]


def verify_ledger_through(pgbouncer, platform) -> dict:
    """The verify_ledger command, run as operations would, on a connection through PgBouncer."""
    env = {**platform.env, "DATABASE_URL": pgbouncer.url(application_name="pgb-cli")}
    done = subprocess.run([sys.executable, "manage.py", "verify_ledger"], cwd=settings.BASE_DIR, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def assert_carried_by_pgbouncer(pgbouncer, before: dict) -> None:
    """Web and worker are PgBouncer's clients on the test database, in transaction pooling, and their transactions
    went through it (SHOW CLIENTS, SHOW POOLS and SHOW STATS of its admin console)."""
    clients = {client["application_name"] for client in pgbouncer.clients()}
    assert {WEB, WORKER} <= clients, clients
    pool = next(p for p in pgbouncer.show("POOLS") if p["database"] == pgbouncer.database)
    assert pool["pool_mode"] == "transaction"
    after = pgbouncer.stats()
    assert after["total_xact_count"] > before["total_xact_count"], (before, after)


def test_collection_through_pgbouncer_is_paid_called_back_and_credited(
        platform, pgbouncer, callback_receiver, bootstrapped, rsa_keys):
    ctx = make_merchant(rsa_keys[0], collection_callback_url=callback_receiver.url)
    before = pgbouncer.stats()

    order = pay_create_ok(platform.base, ctx, "PGB-PAY-1", amount=12345)  # PHP_COLLECT_D0: credits `available`
    assert pay_through_page(order["pay_url"]).status_code == 302

    callback = callback_receiver.wait_for(1, timeout=60)[0].body
    assert (callback["platform_order_no"], callback["status"]) == (order["platform_order_no"], "SUCCESS")
    assert merchant_verifies(callback)
    paid = CollectionOrder.objects.get(platform_order_no=order["platform_order_no"])
    assert paid.status == CollectionOrder.Status.SUCCESS
    assert balance(platform, ctx) == {"currency": "PHP", "available": paid.net_amount, "settling": 0}
    assert verify_ledger_through(pgbouncer, platform)["ok"]
    assert_carried_by_pgbouncer(pgbouncer, before)


def test_payouts_through_pgbouncer_succeed_call_back_and_debit(
        platform, pgbouncer, callback_receiver, bootstrapped, rsa_keys):
    ctx = make_merchant(rsa_keys[0], payout_callback_url=callback_receiver.url)
    call_command("adjust_balance", ctx.merchant_no, "PHP", "1000000", "--reason", "payout float", stdout=io.StringIO())
    before = pgbouncer.stats()

    # Several, one after the other: each gunicorn worker's connection runs some of them, on different sessions.
    payouts = [payout_create_ok(platform.base, ctx, f"PGB-PO-{i}") for i in range(PAYOUTS)]

    callbacks = {c.body["platform_order_no"]: c.body for c in callback_receiver.wait_for(PAYOUTS, timeout=60)}
    assert set(callbacks) == {payout.platform_order_no for payout in payouts}
    assert all(c["status"] == "SUCCESS" and merchant_verifies(c) for c in callbacks.values()), callbacks
    assert set(Payout.objects.values_list("status", flat=True)) == {Payout.Status.SUCCESS}
    spent = sum(payout.amount + payout.fee for payout in payouts)
    assert balance(platform, ctx) == {"currency": "PHP", "available": 1000000 - spent, "settling": 0}
    assert verify_ledger_through(pgbouncer, platform)["ok"]
    assert_carried_by_pgbouncer(pgbouncer, before)
