"""Rate limit (docs/api.md, "Error codes", 1106/429). tests/merchants/test_signed_requests.py covers the limit on
/balance, per merchant, forgeries not spending it and the nonce not burnt. The gap covered here: the budget is one per
merchant across every endpoint, and a create refused by it has no side effect at all (no order, no freeze)."""

import time

import pytest
import time_machine
from django.test import override_settings

from apps.collection.models import CollectionOrder
from apps.ledger.models import Posting
from apps.ledger.services import balance_adjust
from apps.payout.models import Payout
from tests.helpers import assert_error, assert_ok, post_json, signed_post

pytestmark = pytest.mark.django_db

PAY_CREATE = "/openapi/v1/pay/create"
PAYOUT_CREATE = "/openapi/v1/payout/create"
BALANCE = "/openapi/v1/balance"


@override_settings(RATE_LIMIT_PER_SECOND=2)
def test_the_budget_is_shared_by_all_endpoints_and_a_refused_create_creates_nothing(client, merchant):
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=1_000_000, reason="test funds")
    postings = Posting.objects.count()
    with time_machine.travel(time.time(), tick=False) as traveller:  # one fixed one-second window
        assert_ok(signed_post(client, merchant, BALANCE, {}))
        # A verified request spends the budget whatever its business outcome (here: not found).
        assert_error(signed_post(client, merchant, "/openapi/v1/pay/query", {"mch_order_no": "NONE"}), "2002", 404)
        assert_error(signed_post(client, merchant, PAY_CREATE, {
            "mch_order_no": "RL-1", "product_code": "PHP_COLLECT_D1", "amount": 10_000, "currency": "PHP"}),
            "1106", 429)
        assert_error(signed_post(client, merchant, PAYOUT_CREATE, {
            "mch_order_no": "RL-2", "product_code": "PHP_PAYOUT", "amount": 10_000, "currency": "PHP",
            "payee_name": "Payee", "payee_account": "0012345678", "bank_code": "BDO"}), "1106", 429)
        assert not CollectionOrder.objects.exists() and not Payout.objects.exists()
        assert Posting.objects.count() == postings  # no freeze

        traveller.shift(1.0)  # the next window: the same creates go through
        assert_ok(signed_post(client, merchant, PAY_CREATE, {
            "mch_order_no": "RL-1", "product_code": "PHP_COLLECT_D1", "amount": 10_000, "currency": "PHP"}))
        assert CollectionOrder.objects.count() == 1


def test_the_admission_survives_a_redis_connection_closed_between_requests_and_a_flushed_script(client, merchant):
    """The admission runs on a Redis client kept for the process (apps/common/cache_scripts.py): a connection the
    server closed since the last request (a restart, an idle timeout) is replaced before the script is sent, and a
    script Redis no longer holds (SCRIPT FLUSH, a restart) is loaded again; the nonce is still spent once."""
    import redis
    from django.conf import settings

    from apps.common import cache_scripts

    location = settings.CACHES["default"]["LOCATION"]
    assert_ok(signed_post(client, merchant, BALANCE, {}))
    kept = cache_scripts._client(location)
    assert len(kept.connection_pool._available_connections) == 1  # this thread's one request used one connection
    admin = redis.Redis.from_url(location)
    assert admin.client_kill_filter(_id=kept.client_id()) == 1  # closed by the server (only this process's)
    time.sleep(0.1)  # the server's close reaches this side's socket
    assert_ok(signed_post(client, merchant, BALANCE, {}))
    admin.script_flush()
    assert_ok(signed_post(client, merchant, BALANCE, {}, nonce="nonce-by-text-1"))
    assert_error(signed_post(client, merchant, BALANCE, {}, nonce="nonce-by-text-1"), "1103", 401)
