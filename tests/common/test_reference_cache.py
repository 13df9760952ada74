"""Reference data is cached per process, and every committed change is seen by the next request (refcache)."""

import pytest
from django.db import connection, transaction

from apps.channels.models import BankCode
from apps.collection.models import CollectionOrder
from apps.common.refcache import refcache_get
from apps.currencies.models import Currency
from apps.merchants.models import MerchantKey, Product
from tests.helpers import assert_error, assert_ok, signed_post
from tests.support.connections import kill_backend, request_starts

PAY = "/openapi/v1/pay/create"
PAYOUT = "/openapi/v1/payout/create"


def generation() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT value FROM common_referencegeneration WHERE id = 1")
        return cursor.fetchone()[0]


def pay_body(n: int, **overrides) -> dict:
    return {"mch_order_no": f"rc{n}", "product_code": "PHP_COLLECT_D1", "amount": 10000, "currency": "PHP",
            **overrides}


def payout_body(n: int, **overrides) -> dict:
    return {"mch_order_no": f"rp{n}", "product_code": "PHP_PAYOUT", "amount": 10000, "currency": "PHP",
            "payee_name": "Juan Dela Cruz", "payee_account": f"12345{n}", "bank_code": "BDO", **overrides}


@pytest.mark.django_db(transaction=True)  # autocommit, as served: no savepoint around the INSERT
def test_a_warm_pay_create_reads_no_reference_table_only_the_generation(client, merchant):
    from django.test.utils import CaptureQueriesContext

    assert_ok(signed_post(client, merchant, PAY, pay_body(1)))
    with CaptureQueriesContext(connection) as queries:
        assert_ok(signed_post(client, merchant, PAY, pay_body(2)))
    statements = [query["sql"] for query in queries]
    assert "common_referencegeneration" in statements[0]
    reference_tables = ("merchants_", "currencies_", "channels_")
    assert not [sql for sql in statements if any(f'FROM "{table}' in sql for table in reference_tables)], statements
    assert any(sql.startswith('INSERT INTO "collection_collectionorder"') for sql in statements)


@pytest.mark.django_db
def test_queryset_updates_of_reference_rows_are_seen_by_the_next_request(client, merchant):
    assert_ok(signed_post(client, merchant, PAY, pay_body(1)))  # warms keys, currency, channel, product

    Product.objects.filter(code="PHP_COLLECT_D1").update(min_amount=50000)  # no signal: only the trigger
    assert_error(signed_post(client, merchant, PAY, pay_body(2)), "1003", 422)

    Currency.objects.filter(code="PHP").update(active=False)
    assert_error(signed_post(client, merchant, PAY, pay_body(3)), "1001", 422)


@pytest.mark.django_db
def test_a_key_revoked_by_raw_sql_refuses_the_next_request(client, merchant):
    assert_ok(signed_post(client, merchant, "/openapi/v1/balance", {"currency": "PHP"}))
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {MerchantKey._meta.db_table} SET revoked_at = now()")
    assert_error(signed_post(client, merchant, "/openapi/v1/balance", {"currency": "PHP"}), "1104", 401)


@pytest.mark.django_db
def test_a_bank_code_deactivated_is_2006_on_the_next_payout(client, merchant):
    from apps.ledger.services import balance_adjust

    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=10**7, reason="test")
    assert_ok(signed_post(client, merchant, PAYOUT, payout_body(1)))
    BankCode.objects.filter(currency_id="PHP", code="BDO").update(is_active=False)
    assert_error(signed_post(client, merchant, PAYOUT, payout_body(2)), "2006", 422)


@pytest.mark.django_db
def test_every_reference_write_bumps_the_generation_and_other_writes_do_not(merchant):
    before = generation()
    Product.objects.filter(code="NO-SUCH-PRODUCT").update(min_amount=1)  # a statement, even of zero rows
    after_product = generation()
    assert after_product != before
    from apps.ledger.services import balance_adjust

    # The first adjustment in PHP creates the platform's adjustments account: reference data (cached by postings).
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=100, reason="test")
    after_platform_account = generation()
    assert after_platform_account != after_product
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=100, reason="test")  # money only
    assert generation() == after_platform_account


@pytest.mark.django_db(transaction=True)
def test_a_platform_account_created_by_a_rolled_back_posting_is_not_served_from_the_cache(bootstrapped, merchant):
    """Inside a request the generation is read once; a platform account the request's own transaction created (and
    then rolled back) must not stay cached under that generation, or later postings would name a row that does not
    exist."""
    from apps.common import refcache
    from apps.ledger.models import AccountKind, LedgerAccount
    from apps.ledger.services import Leg, platform_account, post

    refcache._local.generation = refcache._PENDING  # as ReferenceScopeMiddleware does for a request
    try:
        assert platform_account(currency="USD", kind=AccountKind.ADJUSTMENTS) is None
        with pytest.raises(RuntimeError), transaction.atomic():
            post(kind="adjustment", cause="rolled-back", currency="USD", merchant_id=merchant.merchant.pk,
                 legs=[Leg(AccountKind.ADJUSTMENTS, -100), Leg(AccountKind.AVAILABLE, 100, merchant.merchant.pk)])
            assert platform_account(currency="USD", kind=AccountKind.ADJUSTMENTS) is not None  # its own row
            raise RuntimeError("roll back")
        assert not LedgerAccount.objects.filter(merchant__isnull=True, currency_id="USD").exists()
        assert platform_account(currency="USD", kind=AccountKind.ADJUSTMENTS) is None
    finally:
        refcache._local.generation = None


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_generation_is_never_handed_out_again(bootstrapped):
    before = generation()
    with pytest.raises(RuntimeError), transaction.atomic():
        Currency.objects.filter(code="PHP").update(active=True)
        rolled_back = generation()
        raise RuntimeError("roll back")
    assert generation() == before
    Currency.objects.filter(code="PHP").update(active=True)
    assert generation() not in (before, rolled_back)


@pytest.mark.django_db
def test_outside_a_request_each_lookup_checks_the_generation(bootstrapped):
    loads = []

    def load():
        loads.append(1)
        return Currency.objects.get(code="PHP").active

    assert refcache_get(("test", "PHP"), load) is True
    assert refcache_get(("test", "PHP"), load) is True
    assert len(loads) == 1  # cached
    Currency.objects.filter(code="PHP").update(name="Philippine peso")
    refcache_get(("test", "PHP"), load)
    assert len(loads) == 2  # the generation moved: loaded again


@pytest.mark.django_db(transaction=True)
def test_threads_never_share_a_cached_instance(bootstrapped):
    """Model instances are mutable: each thread of a process (gunicorn threads, Celery's thread pool) caches its own."""
    import threading

    from django.db import connections

    load = lambda: Currency.objects.get(code="PHP")  # noqa: E731
    here = refcache_get(("test-thread", "PHP"), load)
    assert refcache_get(("test-thread", "PHP"), load) is here  # cached in this thread
    there = []

    def other_thread():
        try:
            there.append(refcache_get(("test-thread", "PHP"), load))
            there.append(refcache_get(("test-thread", "PHP"), load))
        finally:
            connections.close_all()

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join(20)
    assert there[0] is there[1]  # cached in that thread too
    assert there[0] is not here and there[0].code == here.code


@pytest.mark.django_db(transaction=True)
def test_a_connection_killed_between_requests_is_replaced_and_the_request_succeeds(client, merchant,
                                                                                  persistent_connection):
    assert_ok(signed_post(client, merchant, PAY, pay_body(1)))
    dead_pid = kill_backend()
    request_starts()
    assert_ok(signed_post(client, merchant, PAY, pay_body(2)))
    assert connection.connection.info.backend_pid != dead_pid
    assert CollectionOrder.objects.filter(mch_order_no__in=["rc1", "rc2"]).count() == 2


@pytest.mark.django_db(transaction=True)
def test_the_generation_read_is_the_health_check_of_a_kept_connection(client, merchant, persistent_connection,
                                                                      monkeypatch):
    """A signed request on a kept connection sends no `SELECT 1` of its own: its first statement, the generation read,
    is the check (docs/performance.md, "Measured changes"); a dead connection is still replaced (test above)."""
    assert_ok(signed_post(client, merchant, PAY, pay_body(1)))
    checks = []
    monkeypatch.setattr(connection, "is_usable", lambda: checks.append(1) or True)
    request_starts()
    assert not connection.health_check_done
    assert_ok(signed_post(client, merchant, PAY, pay_body(2)))
    assert checks == []
    assert connection.health_check_done
