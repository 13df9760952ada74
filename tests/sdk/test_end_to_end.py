"""A merchant integrated only through the SDK: orders over the live API, the platform's real Celery worker
settling sandbox payouts, and every callback received by the SDK's WSGI app, verified and typed."""

import pytest

import payments_merchant as pm
from apps.callbacks.models import CallbackEvent
from apps.collection.services import collection_notify_paid
from apps.ledger.services import balance_adjust
from tests.sdk.conftest import platform_public_keys, sdk_client
from tests.sdk.test_callbacks import wsgi_receiver  # noqa: F401 - fixture
from tests.support.wait import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PAYOUT = dict(product_code="PHP_PAYOUT", currency="PHP", payee_name="Juan dela Cruz", bank_code="BDO")


def test_collection_payout_and_reversal_callbacks_reach_the_sdk_typed(live_server, merchant, live_celery_worker,
                                                                      wsgi_receiver):
    events: list[pm.CallbackEvent] = []
    url = wsgi_receiver(platform_public_keys(), events.append)
    merchant.merchant.collection_callback_url = url
    merchant.merchant.payout_callback_url = url
    merchant.merchant.save(update_fields=["collection_callback_url", "payout_callback_url"])
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=1_000_000, reason="e2e")
    client = sdk_client(live_server, merchant)

    order = client.pay_create(mch_order_no="e2e-pay", product_code="PHP_COLLECT_D0", amount=10000, currency="PHP",
                              attach="cart=1")
    collection_notify_paid(platform_order_no=order.platform_order_no)
    paid = client.payout_create(mch_order_no="e2e-po-ok", amount=25000, payee_account="0012345678", **PAYOUT)
    returned = client.payout_create(mch_order_no="e2e-po-back", amount=30000, payee_account="0055554001", **PAYOUT)

    wait_until(lambda: len(events) >= 4, timeout=60, what="4 callbacks at the SDK's WSGI app")
    by_kind = {(type(e).__name__, e.platform_order_no): e for e in events}
    collection = by_kind[("CollectionSuccess", order.platform_order_no)]
    assert (collection.amount, collection.attach, collection.status) == (10000, "cart=1", "SUCCESS")
    assert by_kind[("PayoutTerminal", paid.platform_order_no)].status == "SUCCESS"
    assert by_kind[("PayoutTerminal", returned.platform_order_no)].status == "SUCCESS"
    reversal = by_kind[("PayoutReversed", returned.platform_order_no)]
    assert (reversal.reversal_amount, reversal.fee_refund) == (30000, returned.fee)

    assert client.payout_query(platform_order_no=returned.platform_order_no).reversed_at == reversal.reversed_at
    wait_until(lambda: not CallbackEvent.objects.exclude(status=CallbackEvent.Status.DELIVERED).exists(),
               what="every callback event delivered (the WSGI app answered success)")
