"""Refunds of one order at once, on real threads and PostgreSQL: the check and the hold under the pay-in's row lock
never let them add up to more than was paid (docs/api.md, "Refunds")."""

import pytest

from apps.collection.models import Refund
from apps.collection.refunds import refund_create
from apps.common.errors import DomainError
from apps.ledger.selectors import ledger_verify
from tests.collection.conftest import balances
from tests.collection.test_refunds import paid_order
from tests.helpers import at_once, signed_posts_at_once

pytestmark = pytest.mark.django_db(transaction=True)


def test_concurrent_refunds_of_one_order_never_exceed_what_was_paid(client, merchant):
    order = paid_order(client, merchant, amount=100_000)
    paid_order(client, merchant, amount=500_000)  # available would cover every refund: only the order's limit holds

    outcomes = at_once(lambda i: refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no,
                                               mch_refund_no=f"RACE-{i}", amount=30_000), 8)
    made = [refund for refund, exc in outcomes if exc is None]
    refusals = [exc for _, exc in outcomes if exc is not None]
    assert len(made) == 3
    assert all(isinstance(exc, DomainError) and exc.error.code == "2008" for exc in refusals), refusals
    assert sum(refund.amount for refund in Refund.objects.filter(order=order)) == 90_000
    assert balances(merchant) == {"available": 510_000, "settling": 0, "frozen": 90_000}
    assert ledger_verify()["ok"]


def test_concurrent_api_refunds_of_one_order_answer_2008_beyond_what_was_paid(client, merchant):
    order = paid_order(client, merchant, amount=100_000)
    paid_order(client, merchant, amount=500_000)
    bodies = [{"mch_order_no": order.mch_order_no, "mch_refund_no": f"API-RACE-{i}", "amount": 40_000}
              for i in range(6)]
    results = signed_posts_at_once(merchant, "/openapi/v1/refund/create", bodies)
    assert sorted((status, body["code"]) for status, body in results) == [(200, "0")] * 2 + [(422, "2008")] * 4
    assert Refund.objects.filter(order=order).count() == 2
    assert balances(merchant)["frozen"] == 80_000


def test_the_same_mch_refund_no_at_once_makes_one_refund(client, merchant):
    order = paid_order(client, merchant, amount=100_000)
    body = {"mch_order_no": order.mch_order_no, "mch_refund_no": "SAME", "amount": 10_000}
    results = signed_posts_at_once(merchant, "/openapi/v1/refund/create", [body] * 8)
    assert {(status, body["code"]) for status, body in results} == {(200, "0")}
    assert len({body["data"]["refund_no"] for _, body in results}) == 1
    assert balances(merchant)["frozen"] == 10_000
