"""Drill 3: the PostgreSQL backend serving a request is terminated (pg_terminate_backend) mid-request.

The request is made to wait where it matters: another transaction holds the merchant's `available` ledger row,
so payout/create blocks inside its freeze transaction; the drill terminates that backend. No partial rows (no
order without its hold and posting, no hold without its order), a clean 9999/500 envelope, and the next request
on the same server process succeeds. Run under gunicorn with ONE sync worker, so the next request is served by
the very process whose connection was killed; with persistent connections (CONN_MAX_AGE, as `make bench` runs)
and without. With persistent connections, an idle connection killed between requests (a PostgreSQL restart or
failover, an idle timeout in a pooler) must not fail the next request either.
"""

import threading

import psycopg
import pytest
from django.db.models import Count

from apps.ledger.models import Hold, LedgerAccount, Posting
from apps.ledger.services import balance_adjust
from apps.payout.models import Payout
from tests.conftest import make_merchant
from tests.faults.conftest import assert_clean_error_envelope, money_rows, payout_create, payout_create_ok
from tests.faults.processes import Platform, database_url, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def _web_backends(admin: psycopg.Connection) -> list[tuple]:
    """The web server's backends (tagged by application_name): (pid, state, wait_event_type, query)."""
    return admin.execute(
        "SELECT pid, state, wait_event_type, query FROM pg_stat_activity WHERE datname = current_database() "
        "AND application_name = 'faults-web'").fetchall()


@pytest.mark.parametrize("conn_max_age", [0, 600], ids=["fresh-connections", "persistent-connections"])
def test_a_backend_killed_mid_request_leaves_no_partial_rows_and_the_next_request_succeeds(
        procs, private_redis, bootstrapped, rsa_keys, conn_max_age):
    ctx = make_merchant(rsa_keys[0])
    balance_adjust(merchant_no=ctx.merchant_no, currency="PHP", amount=10_000_000, reason="drill top-up")
    available = LedgerAccount.objects.get(merchant_id=ctx.merchant.pk, currency_id="PHP", kind="available")
    platform = Platform(procs, private_redis, CONN_MAX_AGE=conn_max_age)
    platform.start_web(workers=1)
    payout_create_ok(platform.base, ctx, "WARM-UP")  # the server process has done a request (and may keep its connection)

    with psycopg.connect(database_url(), autocommit=True) as admin, psycopg.connect(database_url()) as locker:
        before = money_rows()

        # Hold the merchant's available row: the request's freeze (SELECT ... FOR UPDATE) waits behind it.
        locker.execute("SELECT id FROM ledger_ledgeraccount WHERE id = %s FOR UPDATE", [available.pk])
        result = {}
        request = threading.Thread(target=lambda: result.update(reply=payout_create(platform.base, ctx, "DOOMED")))
        request.start()
        try:
            blocked = wait_until(lambda: [b for b in _web_backends(admin) if b[2] == "Lock"],
                                 timeout=15, what="the request blocked on the ledger row lock")
            # Blocked behind the row lock held here (the statement itself is an EXECUTE of a prepared statement).
            assert len(blocked) == 1, blocked
            assert admin.execute("SELECT pg_blocking_pids(%s)", [blocked[0][0]]).fetchone()[0] == [
                locker.info.backend_pid], blocked
            assert admin.execute("SELECT pg_terminate_backend(%s)", [blocked[0][0]]).fetchone()[0]
        finally:
            locker.rollback()
            request.join(timeout=30)
        assert not request.is_alive()
        status, body = result["reply"]
        assert_clean_error_envelope(status, body, "9999", 500)
        assert money_rows() == before  # nothing of the killed transaction survived
        assert not Payout.objects.filter(mch_order_no="DOOMED").exists()

        # The next request, on the same (only) server process, succeeds; so does the merchant's retry.
        payout_create_ok(platform.base, ctx, "NEXT")
        payout_create_ok(platform.base, ctx, "DOOMED")

        if conn_max_age:
            # An idle persistent connection killed between requests: the next request must still succeed.
            idle = wait_until(lambda: [b for b in _web_backends(admin) if b[1] == "idle"],
                              timeout=5, what="the server's idle persistent connection")
            for pid, *_ in idle:
                admin.execute("SELECT pg_terminate_backend(%s)", [pid])
            payout_create_ok(platform.base, ctx, "AFTER-IDLE-KILL")

    # Every order has its hold and its posting; the holds add up to what is frozen.
    assert Payout.objects.filter(hold__isnull=True).count() == 0
    assert set(Hold.objects.values_list("cause", flat=True)) == set(Payout.objects.values_list("platform_order_no",
                                                                                                flat=True))
    assert not Posting.objects.values("kind", "cause").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert "Traceback" not in "".join(str(v) for v in result.values())
