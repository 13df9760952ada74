"""Drill 6: PostgreSQL unreachable for the web server, then back; first gone (connections reset, new ones refused),
then black-holed (connections accepted, never answered).

The web server reaches the database through a TcpGate on 127.0.0.1 (the machine's PostgreSQL is shared and is not
stopped), with persistent connections as `make bench` and production run. While the database cannot be reached:
every request answers within seconds with the clean 9999/500 envelope, `/healthz` answers 503 naming `database`,
and nothing is written. When it is reachable again the same processes serve the next request; no money moved
twice, none lost.
"""

import pytest
import requests
from django.db import connection

from apps.collection.models import CollectionOrder
from apps.ledger.models import Hold
from apps.ledger.services import balance_adjust
from apps.payout.models import Payout
from tests.conftest import make_merchant
from tests.faults.conftest import (
    api_post,
    assert_clean_error_envelope,
    money_rows,
    pay_create,
    pay_create_ok,
    payout_create,
    timed,
)
from tests.faults.processes import Platform, database_url, wait_until
from tests.faults.tcp_gate import TcpGate

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

# Refused connections fail at once; a black-holed one after the connect timeout (DATABASE_CONNECT_TIMEOUT, 5 s).
REQUEST_BOUND = {"cut": 5.0, "hang": 12.0}


@pytest.fixture
def pg_gate():
    gate = TcpGate(int(connection.settings_dict["PORT"] or 5432))
    yield gate
    gate.close()


def test_database_gone_then_black_holed_fails_requests_cleanly_and_the_same_processes_recover(
        procs, private_redis, pg_gate, bootstrapped, rsa_keys):
    ctx = make_merchant(rsa_keys[0])
    balance_adjust(merchant_no=ctx.merchant_no, currency="PHP", amount=10_000_000, reason="drill top-up")
    platform = Platform(procs, private_redis, CONN_MAX_AGE=600)
    platform.start_web(workers=1, extra_env={
        "DATABASE_URL": database_url(application_name="faults-web", port=pg_gate.port)})
    pay_create_ok(platform.base, ctx, "UP-0")
    assert payout_create(platform.base, ctx, "PAYOUT-UP-0")[1]["code"] == "0"

    observed = {}
    for failure in ("cut", "hang"):
        before = money_rows(), CollectionOrder.objects.count()
        getattr(pg_gate, failure)()
        timings = []
        for call in (lambda: pay_create(platform.base, ctx, f"{failure}-pay"),
                     lambda: payout_create(platform.base, ctx, f"{failure}-payout"),
                     lambda: api_post(platform.base, ctx, "balance", {"currency": "PHP"})):
            (status, body), seconds = timed(call)
            assert_clean_error_envelope(status, body, "9999", 500)
            timings.append(seconds)
        health, seconds = timed(lambda: requests.get(f"{platform.base}/healthz", timeout=30))
        timings.append(seconds)
        assert health.status_code == 503 and health.json()["failing"] == ["database"], health.text
        assert max(timings) < REQUEST_BOUND[failure], (failure, timings)
        assert (money_rows(), CollectionOrder.objects.count()) == before  # nothing written while the database was out of reach
        observed[failure] = timings

        pg_gate.open()
        wait_until(lambda n=f"{failure}-back": pay_create(platform.base, ctx, n)[1]["code"] == "0", timeout=20,
                   what=f"a create succeeding after the database came back ({failure})")
        status, body = payout_create(platform.base, ctx, f"PAYOUT-{failure}-back")
        assert (status, body["code"]) == (200, "0"), body
    print(f"requests (pay/create, payout/create, balance, healthz) while the database was gone: {observed['cut']} s,"
          f" black-holed: {observed['hang']} s")

    assert platform.web.alive(), platform.web.tail()
    assert set(CollectionOrder.objects.values_list("mch_order_no", flat=True)) == {"UP-0", "cut-back", "hang-back"}
    payouts = Payout.objects.select_related("hold").order_by("pk")
    assert [p.mch_order_no for p in payouts] == ["PAYOUT-UP-0", "PAYOUT-cut-back", "PAYOUT-hang-back"]
    assert all(p.hold.amount == p.amount + p.fee for p in payouts)
    assert Hold.objects.count() == 3
