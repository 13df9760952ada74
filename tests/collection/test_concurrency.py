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


def test_replays_of_pay_create_while_the_payer_presses_pay_neither_deadlock_nor_fail(merchant, monkeypatch, caplog):
    """The replay race for pay/create: its key is claimed by the order's INSERT and no money moves at create, so a
    replay arriving while Pay holds the order row (slowed before its credit) waits at most, and is answered."""
    import json
    import threading
    import time

    from django.test import Client

    from apps.ledger import services as ledger_services
    from tests.collection.conftest import balances

    params = order_params(amount=6000)
    first = Client().post(CREATE, data=json.dumps(merchant.signed_body(params)), content_type="application/json")
    order = CollectionOrder.objects.get(platform_order_no=first.json()["data"]["platform_order_no"])
    bodies = [json.dumps(merchant.signed_body(params)) for _ in range(6)]
    entered, original = threading.Event(), ledger_services.post

    def slow_post(**kwargs):
        entered.set()
        time.sleep(0.4)
        return original(**kwargs)

    monkeypatch.setattr(ledger_services, "post", slow_post)

    def actor(index: int):
        if index == 0:
            return Client().post(f"/pay/{order.pay_token}", {"action": "pay"}).status_code
        assert entered.wait(10)
        response = Client().post(CREATE, data=bodies[index - 1], content_type="application/json")
        return response.status_code, response.json()["code"], response.json()["data"]["platform_order_no"]

    outcomes = at_once(actor, 7)
    assert [exc for _, exc in outcomes] == [None] * 7
    assert outcomes[0][0] == 302
    assert {result for result, _ in outcomes[1:]} == {(200, "0", order.platform_order_no)}
    order.refresh_from_db()
    assert order.status == "SUCCESS" and balances(merchant)["settling"] + balances(merchant)["available"] > 0
    assert "40P01" not in caplog.text
