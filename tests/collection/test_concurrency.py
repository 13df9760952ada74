"""Idempotent create under real concurrency (PostgreSQL, real threads): the unique constraint decides."""


import pytest

from apps.collection.models import CollectionOrder
from tests.collection.conftest import order_params
from tests.helpers import at_once, signed_posts_at_once

pytestmark = pytest.mark.django_db(transaction=True)

CREATE = "/openapi/v1/pay/create"


def test_twenty_concurrent_identical_creates_make_one_order(merchant):
    params = order_params(mch_order_no="RACE-1", amount=4200, subject="race")
    results = signed_posts_at_once(merchant, CREATE, [params] * 20)
    assert all(r is not None for r in results)
    assert {(status, body["code"]) for status, body in results} == {(200, "0")}
    assert len({body["data"]["platform_order_no"] for _, body in results}) == 1
    assert CollectionOrder.objects.filter(merchant=merchant.merchant, mch_order_no="RACE-1").count() == 1


def test_mch_order_no_constraint_holds_under_race_of_different_params(merchant):
    bodies = [order_params(mch_order_no="RACE-2", amount=1000 + i) for i in range(10)]
    results = signed_posts_at_once(merchant, CREATE, bodies)
    outcomes = sorted((status, body["code"]) for status, body in results)
    assert outcomes == [(200, "0")] + [(409, "2001")] * 9
    order = CollectionOrder.objects.get(merchant=merchant.merchant, mch_order_no="RACE-2")
    winner = next(body for status, body in results if status == 200)
    assert winner["data"]["platform_order_no"] == order.platform_order_no
    assert winner["data"]["amount"] == order.amount


def test_concurrent_duplicate_notifications_credit_once(client, merchant):
    from apps.collection.services import collection_notify_paid
    from apps.ledger.models import Posting
    from tests.collection.conftest import balances, create_ok

    order = create_ok(client, merchant, amount=6000)
    outcomes = at_once(lambda i: collection_notify_paid(platform_order_no=order.platform_order_no), 8)
    errors = [exc for _, exc in outcomes if exc]
    assert errors == []
    assert Posting.objects.filter(kind="collection.success", cause=order.platform_order_no).count() == 1
    assert balances(merchant)["settling"] == 6000


def test_concurrent_settlement_runs_release_each_credit_once(client, merchant):
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from apps.collection.services import (
        collection_notify_paid,
        collection_settlement_release,
    )
    from apps.ledger.models import Posting
    from tests.collection.conftest import balances, create_ok

    manila = ZoneInfo("Asia/Manila")
    for amount in (1000, 2000, 3000, 4000):
        order = create_ok(client, merchant, amount=amount)
        collection_notify_paid(platform_order_no=order.platform_order_no,
                               paid_at=datetime(2025, 3, 10, 12, 0, tzinfo=manila))
    outcomes = at_once(lambda i: collection_settlement_release(now=datetime(2025, 3, 11, 1, 0, tzinfo=manila)), 4)
    results, errors = [r for r, _ in outcomes], [exc for _, exc in outcomes if exc]
    assert errors == []
    released = [r["released"].get("PHP", {"count": 0, "amount": 0}) for r in results]
    assert sum(r["count"] for r in released) == 4 and sum(r["amount"] for r in released) == 10000
    assert Posting.objects.filter(kind="settlement.release").count() == 4
    assert balances(merchant) == {"available": 10000, "settling": 0, "frozen": 0}
