"""POST /refund/create and /refund/query: signed, checked in the documented order, each refusal moving nothing
(docs/api.md, "Refunds")."""

import pytest

from apps.collection.models import Refund
from apps.collection.refunds import OUTCOME_FAILED, refund_channel_result
from apps.ledger.models import Posting
from tests.collection.conftest import balances, create_ok
from tests.collection.test_refunds import paid_order
from tests.helpers import assert_error, assert_ok, signed_post

pytestmark = pytest.mark.django_db

CREATE = "/openapi/v1/refund/create"
QUERY = "/openapi/v1/refund/query"


def state(ctx) -> tuple:
    return balances(ctx), Refund.objects.count(), Posting.objects.count()


def test_refund_create_answers_the_refund_and_the_orders_totals(client, merchant):
    order = paid_order(client, merchant, amount=100_000)
    data = assert_ok(signed_post(client, merchant, CREATE, {"mch_order_no": order.mch_order_no,
                                                            "mch_refund_no": "RF-1", "amount": 30_000,
                                                            "reason": "returned goods"}))
    refund = Refund.objects.get(mch_refund_no="RF-1")
    assert data == {"mch_refund_no": "RF-1", "refund_no": refund.refund_no, "mch_order_no": order.mch_order_no,
                    "platform_order_no": order.platform_order_no, "currency": "PHP", "amount": 30_000,
                    "status": "PROCESSING", "created_at": int(refund.created_at.timestamp()),
                    "refunded_total": 30_000, "refundable": 70_000}
    assert refund.reason == "returned goods"
    assert balances(merchant) == {"available": 70_000, "settling": 0, "frozen": 30_000}


@pytest.mark.parametrize("business, field", [
    ({"mch_refund_no": "RF 1", "amount": 100}, "mch_refund_no"),
    ({"mch_refund_no": "RF-1", "amount": 0}, "amount"),
    ({"mch_refund_no": "RF-1", "amount": "100"}, "amount"),
    ({"mch_refund_no": "RF-1", "amount": 100, "reason": "x" * 257}, "reason"),
    ({"amount": 100}, "mch_refund_no"),
])
def test_a_malformed_refund_is_1000_naming_the_field(client, merchant, business, field):
    order = paid_order(client, merchant)
    before = state(merchant)
    body = assert_error(signed_post(client, merchant, CREATE, {"mch_order_no": order.mch_order_no, **business}),
                        "1000", 400)
    assert field in body["msg"]
    assert state(merchant) == before


def test_a_refund_without_an_order_number_is_1000(client, merchant):
    body = assert_error(signed_post(client, merchant, CREATE, {"mch_refund_no": "RF-1", "amount": 100}), "1000", 400)
    assert "mch_order_no or platform_order_no" in body["msg"]


def test_a_refund_of_an_unknown_or_another_merchants_order_is_2002(client, merchant, other_merchant):
    order = paid_order(client, merchant)
    before = state(merchant)
    assert_error(signed_post(client, other_merchant, CREATE, {"platform_order_no": order.platform_order_no,
                                                              "mch_refund_no": "RF-1", "amount": 100}), "2002", 404)
    assert_error(signed_post(client, merchant, CREATE, {"mch_order_no": "nope", "mch_refund_no": "RF-1",
                                                        "amount": 100}), "2002", 404)
    assert state(merchant) == before


def test_identical_fields_replay_the_refund_and_different_ones_are_2001(client, merchant):
    order = paid_order(client, merchant, amount=100_000)
    fields = {"mch_order_no": order.mch_order_no, "mch_refund_no": "RF-1", "amount": 99_999}
    first = assert_ok(signed_post(client, merchant, CREATE, fields))
    refund_channel_result(refund_no=first["refund_no"], outcome=OUTCOME_FAILED, fail_reason="closed")
    before = state(merchant)
    # The replay answers the original with its current status, even though the fields would now be refused.
    again = assert_ok(signed_post(client, merchant, CREATE, fields))
    assert (again["refund_no"], again["status"], again["fail_reason"]) == (first["refund_no"], "FAILED", "closed")
    body = assert_error(signed_post(client, merchant, CREATE, {**fields, "amount": 5}), "2001", 409)
    assert "RF-1" in body["msg"] and "amount" in body["msg"]
    assert state(merchant) == before


def test_a_refund_of_an_unpaid_order_is_2007(client, merchant):
    paid_order(client, merchant, amount=100_000)
    unpaid = create_ok(client, merchant, product_code="PHP_COLLECT_D0", amount=10_000)
    before = state(merchant)
    body = assert_error(signed_post(client, merchant, CREATE, {"mch_order_no": unpaid.mch_order_no,
                                                               "mch_refund_no": "RF-1", "amount": 100}), "2007", 422)
    assert "not paid" in body["msg"]
    assert state(merchant) == before


def test_a_refund_beyond_what_is_refundable_is_2008(client, merchant):
    order = paid_order(client, merchant, amount=100_000)
    assert_ok(signed_post(client, merchant, CREATE, {"mch_order_no": order.mch_order_no, "mch_refund_no": "RF-1",
                                                     "amount": 30_000}))
    assert_ok(signed_post(client, merchant, CREATE, {"mch_order_no": order.mch_order_no, "mch_refund_no": "RF-2",
                                                     "amount": 70_000}))
    before = state(merchant)
    body = assert_error(signed_post(client, merchant, CREATE, {"mch_order_no": order.mch_order_no,
                                                               "mch_refund_no": "RF-3", "amount": 100}), "2008", 422)
    assert "0 still refundable" in body["msg"]
    assert state(merchant) == before


def test_a_refund_that_available_does_not_cover_is_2003(client, merchant):
    order = paid_order(client, merchant, amount=100_000, product_code="PHP_COLLECT_D1")
    before = state(merchant)
    assert_error(signed_post(client, merchant, CREATE, {"mch_order_no": order.mch_order_no, "mch_refund_no": "RF-1",
                                                        "amount": 100}), "2003", 422)
    assert state(merchant) == before


def test_refund_query_answers_by_either_number_with_the_terminal_fields(client, merchant, other_merchant):
    order = paid_order(client, merchant, amount=100_000)
    created = assert_ok(signed_post(client, merchant, CREATE, {"platform_order_no": order.platform_order_no,
                                                               "mch_refund_no": "RF-1", "amount": 40_099}))
    queried = assert_ok(signed_post(client, merchant, QUERY, {"mch_refund_no": "RF-1"}))
    assert queried == created
    refund_channel_result(refund_no=created["refund_no"], outcome=OUTCOME_FAILED, fail_reason="closed")
    refund = Refund.objects.get(mch_refund_no="RF-1")
    queried = assert_ok(signed_post(client, merchant, QUERY, {"refund_no": created["refund_no"]}))
    assert queried == {**created, "status": "FAILED", "finished_at": int(refund.finished_at.timestamp()),
                       "fail_reason": "closed", "refunded_total": 0, "refundable": 100_000}
    assert_error(signed_post(client, other_merchant, QUERY, {"refund_no": created["refund_no"]}), "2002", 404)
    assert_error(signed_post(client, merchant, QUERY, {}), "1000", 400)


def test_an_unknown_order_is_2002_even_with_a_used_mch_refund_no(client, merchant):
    order = paid_order(client, merchant)
    assert_ok(signed_post(client, merchant, CREATE, {"mch_order_no": order.mch_order_no, "mch_refund_no": "RF-1",
                                                     "amount": 100}))
    before = state(merchant)
    assert_error(signed_post(client, merchant, CREATE, {"mch_order_no": "nope", "mch_refund_no": "RF-1",
                                                        "amount": 100}), "2002", 404)
    assert state(merchant) == before


def test_a_create_reads_its_order_once_under_its_lock_writes_its_refund_once_and_a_replay_reaches_no_ledger(
        client, merchant):
    """docs/performance.md, refund/create: the order's lookup is its row lock, the refund's INSERT draws its hold's
    id (no UPDATE afterwards), the hold is one call of ledger_post, and the submission is woken after commit
    without a statement; a replay never reaches the ledger."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    order = paid_order(client, merchant, amount=100_000)
    fields = {"platform_order_no": order.platform_order_no, "mch_refund_no": "RF-1", "amount": 1_000}
    with CaptureQueriesContext(connection) as create:
        assert_ok(signed_post(client, merchant, CREATE, fields))
    with CaptureQueriesContext(connection) as replay:
        assert_ok(signed_post(client, merchant, CREATE, fields))
    sql = [q["sql"] for q in create.captured_queries]
    order_reads = [s for s in sql if 'FROM "collection_collectionorder"' in s]
    assert len(order_reads) == 1 and order_reads[0].endswith("FOR UPDATE"), order_reads
    assert [s.split()[0] for s in sql].count("UPDATE") == 0, sql
    ledger = [s for s in sql if "ledger_" in s]
    assert len(ledger) == 1 and "FROM ledger_post(" in ledger[0], ledger
    assert [q["sql"] for q in replay.captured_queries if "ledger_" in q["sql"]] == []
    refund = Refund.objects.get(mch_refund_no="RF-1")
    assert refund.hold.amount == 1_000 and refund.hold.cause == refund.refund_no


def test_the_refund_insert_names_every_column_of_the_model_but_those_a_new_refund_leaves_to_the_database():
    """A field added to Refund fails here until the named INSERT writes it (or it is NULL or a database default on a
    new refund, listed here)."""
    import re

    from apps.collection import refunds

    columns = re.search(r"\((.*?)\)\s*VALUES", refunds._REFUND_INSERT, re.S).group(1)
    named = [column.strip().strip('"') for column in columns.split(",")]
    left_out = {"id", "hold_id", "finished_at", "submitted_at"}
    assert named == [field.column for field in Refund._meta.concrete_fields if field.column not in left_out]
    assert refunds._REFUND_INSERT.count("%s") == len(named)


def test_a_created_refund_is_the_row_it_wrote(client, merchant):
    from apps.collection.refunds import refund_create

    order = paid_order(client, merchant)
    refund = refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-ROW",
                           amount=2_500, reason="size")
    assert not refund._state.adding and refund._state.db == "default"
    stored = Refund.objects.get(pk=refund.pk)
    for field in Refund._meta.concrete_fields:
        assert getattr(stored, field.attname) == getattr(refund, field.attname), field.attname
    assert (stored.status, stored.finished_at, stored.submitted_at) == ("PROCESSING", None, None)
    assert stored.channel_id == order.channel_id and stored.created_at == stored.updated_at
