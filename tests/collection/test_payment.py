"""Upstream 'paid' notifications: one idempotent service, ledger split, callback outbox (docs/api.md, "Collection
orders")."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.callbacks.models import CallbackEvent
from apps.collection.models import CollectionOrder
from apps.collection.services import collection_expire, collection_notify_paid
from apps.common.errors import DomainError
from apps.ledger import selectors
from apps.ledger.models import AccountKind, Posting
from tests.collection.conftest import balances, create_ok

pytestmark = pytest.mark.django_db


def platform_balance(kind: AccountKind, currency: str = "PHP") -> int:
    return selectors.platform_balance(currency=currency, kind=kind)


def test_d1_payment_credits_settling_and_enqueues_callback(client, merchant):
    order = create_ok(client, merchant, product_code="PHP_COLLECT_D1", amount=25000, attach="ref=9")
    paid_at = timezone.now().replace(microsecond=0)
    collection_notify_paid(platform_order_no=order.platform_order_no, upstream_reference="UP-1", paid_at=paid_at)
    order.refresh_from_db()
    assert (order.status, order.paid_at, order.upstream_reference) == ("SUCCESS", paid_at, "UP-1")
    assert balances(merchant) == {"available": 0, "settling": 25000, "frozen": 0}
    assert platform_balance(AccountKind.PAYIN_CLEARING) == -25000
    event = CallbackEvent.objects.get(platform_order_no=order.platform_order_no)
    assert event.type == CallbackEvent.Type.COLLECTION_SUCCESS
    assert event.merchant_id == merchant.merchant.pk
    assert event.payload == {"platform_order_no": order.platform_order_no, "mch_order_no": order.mch_order_no,
                             "amount": 25000, "currency": "PHP", "status": "SUCCESS",
                             "paid_at": int(paid_at.timestamp()), "attach": "ref=9"}


def test_d0_payment_credits_available_directly(client, merchant):
    order = create_ok(client, merchant, product_code="PHP_COLLECT_D0", amount=9900)
    collection_notify_paid(platform_order_no=order.platform_order_no)
    assert balances(merchant) == {"available": 9900, "settling": 0, "frozen": 0}


def test_fee_is_split_to_platform_revenue_with_ceil_rounding(client, merchant, fee_product):
    # fee = 100 + ceil(12345 × 250 / 10000) = 100 + ceil(308.625) = 409
    order = create_ok(client, merchant, product_code="PHP_COLLECT_FEE", amount=12345)
    assert order.fee == 409
    collection_notify_paid(platform_order_no=order.platform_order_no)
    assert balances(merchant)["available"] == 12345 - 409
    assert platform_balance(AccountKind.FEE_REVENUE) == 409
    assert platform_balance(AccountKind.PAYIN_CLEARING) == -12345
    posting = Posting.objects.get(kind="collection.success", cause=order.platform_order_no)
    assert sorted(posting.entries.values_list("amount", flat=True)) == [-12345, 409, 12345 - 409]


def test_exact_rate_fee_is_not_rounded_up(client, merchant, fee_product):
    order = create_ok(client, merchant, product_code="PHP_COLLECT_FEE", amount=40000)
    assert order.fee == 100 + 1000


def test_duplicate_notification_credits_once(client, merchant):
    order = create_ok(client, merchant, amount=7000)
    first = collection_notify_paid(platform_order_no=order.platform_order_no, upstream_reference="UP-A")
    second = collection_notify_paid(platform_order_no=order.platform_order_no, upstream_reference="UP-B",
                                    paid_at=timezone.now() + timedelta(hours=1))
    assert second.paid_at == first.paid_at and second.upstream_reference == "UP-A"
    assert balances(merchant)["settling"] == 7000
    assert Posting.objects.filter(kind="collection.success").count() == 1
    assert CallbackEvent.objects.filter(platform_order_no=order.platform_order_no).count() == 1


def test_late_payment_after_expiry_succeeds_once(client, merchant):
    order = create_ok(client, merchant, amount=8000, expire_seconds=60)
    assert collection_expire(order_id=order.pk, now=order.expire_at + timedelta(seconds=1))
    order.refresh_from_db()
    assert order.status == CollectionOrder.Status.EXPIRED
    for _ in range(2):
        collection_notify_paid(platform_order_no=order.platform_order_no)
    order.refresh_from_db()
    assert order.status == CollectionOrder.Status.SUCCESS and order.paid_at is not None
    assert balances(merchant)["settling"] == 8000
    assert Posting.objects.filter(kind="collection.success").count() == 1
    assert CallbackEvent.objects.filter(platform_order_no=order.platform_order_no).count() == 1


def test_notification_for_unknown_order_is_refused(db):
    with pytest.raises(DomainError) as raised:
        collection_notify_paid(platform_order_no="C2020NOPE")
    assert raised.value.error.code == "2002"


def test_callback_dispatch_waits_for_commit(client, merchant, django_capture_on_commit_callbacks):
    order = create_ok(client, merchant)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        collection_notify_paid(platform_order_no=order.platform_order_no)
    assert len(callbacks) == 1
