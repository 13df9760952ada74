"""The reads that tolerate lag (docs/architecture.md, "Where reads go") against a real streaming replica: the operations
overview, the portal's lists and exports render from it and say "as of"; a replica that lags past the limit, or is
stopped mid-test, is skipped for the primary with a metric and a log line; a read that decides money never leaves the
primary. The replica's replay is paused to tell which database answered: an order made meanwhile is on the primary
only."""

import logging
import time
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connections, transaction
from django.test import Client
from prometheus_client import REGISTRY

from apps.collection.models import CollectionOrder
from apps.collection.services import collection_create, collection_notify_paid
from apps.common.replica import REPLICA, lagging_reads, reads_from, replica_health_forget
from apps.payout.models import Payout
from tests.conftest import make_merchant
from tests.portal.support import portal_login, portal_user
from tests.support.staff import admin_login

OVERVIEW = "/admin/operations/operationsoverview/"
PAYINS = "/portal/payins/"

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", REPLICA])


def fallbacks(reason: str) -> float:
    return REGISTRY.get_sample_value("payments_replica_fallbacks_total", {"reason": reason}) or 0.0


def replica_pages() -> float:
    return REGISTRY.get_sample_value("payments_lag_tolerant_reads_total", {"database": "replica"}) or 0.0


@contextmanager
def statements_read_on(alias: str):
    """Whether each statement read on `alias` found a row, in order (a wrapper on that connection's queries)."""
    found = []

    def wrapper(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.startswith("SELECT") and '"ledger_statement"' in sql:
            found.append(context["cursor"].rowcount > 0)
        return result

    with connections[alias].execute_wrapper(wrapper):
        yield found


def pay_in(ctx, mch_order_no: str, amount: int = 10_000) -> CollectionOrder:
    order = collection_create(merchant=ctx.merchant, mch_order_no=mch_order_no, product_code="PHP_COLLECT_D0",
                              amount=amount, currency="PHP")
    collection_notify_paid(platform_order_no=order.platform_order_no)
    return order


@pytest.fixture
def shop(on_pair, bootstrapped, rsa_keys):
    """A merchant with one paid pay-in, a finance person signed in to the portal, on-call staff signed in to the
    admin; everything on the replica too."""
    ctx = make_merchant(rsa_keys[0])
    pay_in(ctx, "SEEN-1")
    portal = portal_login(Client(), portal_user(ctx.merchant, "finance"))
    admin = admin_login(Client(), User.objects.create_superuser("oncall", password="pw-for-tests-1"))
    on_pair.wait_caught_up()
    return ctx, portal, admin


def made_while_paused(pair, ctx) -> CollectionOrder:
    """The replica stops applying WAL; then a pay-in is made on the primary."""
    pair.pause_replay()
    return pay_in(ctx, "LATER-2", amount=20_000)


def test_overview_and_portal_lists_render_from_the_replica_as_of_its_replay_time(on_pair, shop, settings):
    ctx, portal, admin = shop
    settings.DATABASE_REPLICA_MAX_LAG = 120
    made_while_paused(on_pair, ctx)

    before = replica_pages()
    listed = portal.get(PAYINS)
    overview = admin.get(OVERVIEW)
    assert replica_pages() == before + 2
    assert listed.status_code == overview.status_code == 200
    page = listed.content.decode()
    assert "SEEN-1" in page and "LATER-2" not in page  # the replica's rows: it has not replayed the later one
    assert 'id="portal-as-of"' in page
    figures = overview.content.decode()
    assert "read from the replica, as of" in figures
    assert "₱100.00" in figures and "₱300.00" not in figures  # today's pay-ins: the first one only

    on_pair.resume_replay()
    on_pair.wait_caught_up()
    replica_health_forget()
    page = portal.get(PAYINS).content.decode()
    assert "SEEN-1" in page and "LATER-2" in page and 'id="portal-as-of"' in page  # caught up: as of the check


def test_export_streams_from_the_replica_and_says_as_of(on_pair, shop, settings):
    ctx, portal, _ = shop
    settings.DATABASE_REPLICA_MAX_LAG = 120
    made_while_paused(on_pair, ctx)

    response = portal.get(PAYINS + "export.csv")
    body = b"".join(response.streaming_content).decode()
    assert "SEEN-1" in body and "LATER-2" not in body
    assert response["X-Data-As-Of"]


def test_a_replica_behind_the_limit_is_skipped_for_the_primary_with_a_metric_and_a_log_line(
        on_pair, shop, settings, caplog):
    ctx, portal, admin = shop
    settings.DATABASE_REPLICA_MAX_LAG = 1
    made_while_paused(on_pair, ctx)
    time.sleep(1.5)  # the replica's last replayed commit is now more than the limit ago
    before = fallbacks("lagging")

    with caplog.at_level(logging.WARNING, logger="apps.common.replica"):
        page = portal.get(PAYINS).content.decode()
        figures = admin.get(OVERVIEW).content.decode()
    assert "SEEN-1" in page and "LATER-2" in page and 'id="portal-as-of"' not in page
    assert "read from the replica" not in figures and "₱300.00" in figures
    assert fallbacks("lagging") == before + 1  # one decision, kept for the interval: the overview reused it
    assert any("replica skipped" in r.getMessage() and "lagging" in r.getMessage() for r in caplog.records)


def test_a_replica_stopped_mid_test_sends_the_pages_to_the_primary(on_pair, shop, settings, caplog):
    ctx, portal, admin = shop
    settings.DATABASE_REPLICA_MAX_LAG = 120
    made_while_paused(on_pair, ctx)
    assert "LATER-2" not in portal.get(PAYINS).content.decode()  # from the replica, which stays the decision

    on_pair.replica.stop("fast")
    before = fallbacks("failed_mid_read"), fallbacks("down")
    with caplog.at_level(logging.WARNING, logger="apps.common.replica"):
        page = portal.get(PAYINS).content.decode()  # the decided replica fails: the page is read again
        figures = admin.get(OVERVIEW).content.decode()  # the decision now: the primary, without a connect
    assert "LATER-2" in page and 'id="portal-as-of"' not in page
    assert "₱300.00" in figures and "read from the replica" not in figures
    assert (fallbacks("failed_mid_read"), fallbacks("down")) == (before[0] + 1, before[1])
    assert any("replica skipped" in r.getMessage() for r in caplog.records)

    replica_health_forget()  # the interval is over: the check finds it down, once
    started = time.monotonic()
    assert "LATER-2" in portal.get(PAYINS).content.decode()
    assert "LATER-2" in portal.get(PAYINS).content.decode()
    assert time.monotonic() - started < 5
    assert fallbacks("down") == before[1] + 1

    on_pair.replica.start()  # back, and replaying (a restarted standby is not paused)
    on_pair.wait_caught_up()
    replica_health_forget()
    before = replica_pages()
    page = portal.get(PAYINS).content.decode()
    assert "LATER-2" in page and 'id="portal-as-of"' in page and replica_pages() == before + 1


def test_a_read_that_decides_money_stays_on_the_primary(on_pair, shop, settings):
    ctx, _, _ = shop
    settings.DATABASE_REPLICA_MAX_LAG = 120
    later = made_while_paused(on_pair, ctx)

    with lagging_reads() as reads:
        assert reads.on_replica
        assert not CollectionOrder.objects.filter(pk=later.pk).exists()  # a lag-tolerant read: the replica's
        with transaction.atomic():
            assert CollectionOrder.objects.filter(pk=later.pk).exists()  # in a transaction: the primary's
            assert CollectionOrder.objects.select_for_update().filter(pk=later.pk).exists()
            assert not Payout.objects.select_for_update().exists()
        updated = CollectionOrder.objects.filter(pk=later.pk).update(subject="written")  # writes: the primary
    assert updated == 1
    assert CollectionOrder.objects.filter(pk=later.pk).exists()  # outside the block: the primary again


def test_a_down_replica_costs_one_connect_per_interval(on_pair, shop, settings):
    settings.DATABASE_REPLICA_CHECK_INTERVAL = 0.5
    on_pair.replica.stop("fast")
    before = fallbacks("down")
    assert not reads_from().on_replica
    assert not reads_from().on_replica
    assert fallbacks("down") == before + 1  # the second asked within the interval: no connect
    time.sleep(0.6)
    assert not reads_from().on_replica
    assert fallbacks("down") == before + 2


def test_admin_changelists_read_from_the_replica_and_their_actions_from_the_primary(on_pair, shop, settings):
    ctx, _, admin = shop
    settings.DATABASE_REPLICA_MAX_LAG = 120
    later = made_while_paused(on_pair, ctx)
    changelist = "/admin/collection/collectionorder/"

    page = admin.get(changelist).content.decode()
    assert "SEEN-1" in page and "LATER-2" not in page and "Read from the replica, as of" in page
    assert "LATER-2" in admin.get(f"{changelist}{later.pk}/change/").content.decode()  # an object's page: primary


def store_statement(ctx, day):
    from apps.ledger.models import Statement
    from apps.ledger.services import statement_get

    built = statement_get(merchant=ctx.merchant, currency="PHP", day=day)
    Statement.objects.create(merchant=ctx.merchant, currency_id="PHP", date=day, csv_text=built.csv_text,
                             digest=built.digest, signature=built.signature, key_version=built.key_version)
    return built


def test_a_stored_statement_of_a_closed_day_is_served_from_the_replica(on_pair, shop, settings):
    from apps.ledger.statements import statement_today

    ctx, portal, _ = shop
    settings.DATABASE_REPLICA_MAX_LAG = 120
    yesterday, before = statement_today() - timedelta(days=1), statement_today() - timedelta(days=2)
    stored = store_statement(ctx, yesterday)
    on_pair.wait_caught_up()

    with statements_read_on("default") as on_primary, statements_read_on(REPLICA) as on_replica:
        response = portal.get("/portal/statements/", {"currency": "PHP", "date": yesterday.isoformat(),
                                                      "format": "csv"})
    assert (response.status_code, response.content.decode()) == (200, stored.csv_text)
    assert (on_replica, on_primary) == ([True], [])
    with statements_read_on("default") as on_primary, statements_read_on(REPLICA) as on_replica:
        response = Client().post("/openapi/v1/statement", data=ctx.signed_body(
            {"currency": "PHP", "date": yesterday.isoformat(), "format": "csv"}), content_type="application/json")
    assert (response.status_code, response.content.decode()) == (200, stored.csv_text)
    assert (on_replica, on_primary) == ([True], [])

    on_pair.pause_replay()  # a statement stored now is on the primary only: the page finds it there
    stored = store_statement(ctx, before)
    with statements_read_on("default") as on_primary, statements_read_on(REPLICA) as on_replica:
        response = portal.get("/portal/statements/", {"currency": "PHP", "date": before.isoformat(), "format": "csv"})
    assert (response.status_code, response.content.decode()) == (200, stored.csv_text)
    assert (on_replica, on_primary) == ([False], [True])


def test_a_replica_that_is_not_a_standby_is_skipped(on_pair, shop, caplog):
    """A promoted replica, or a URL naming a primary: its data may go another way than the primary's."""
    replica = connections[REPLICA]
    replica.close()
    port = replica.settings_dict["PORT"]
    replica.settings_dict["PORT"] = str(on_pair.primary.port)
    before = fallbacks("not_in_recovery")
    try:
        with caplog.at_level(logging.WARNING, logger="apps.common.replica"):
            assert not reads_from().on_replica
    finally:
        replica.close()
        replica.settings_dict["PORT"] = port
    assert fallbacks("not_in_recovery") == before + 1
    assert any("not_in_recovery" in r.getMessage() for r in caplog.records)
