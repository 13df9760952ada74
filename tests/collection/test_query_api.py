"""POST /openapi/v1/pay/query (docs/api.md, "Endpoints"): lookup by either number, scoped to the merchant."""

import json

import pytest

from apps.collection.services import collection_notify_paid
from tests.collection.conftest import QUERY, create
from tests.helpers import signed_post

pytestmark = pytest.mark.django_db


def test_query_by_mch_order_no_returns_created_order_without_paid_at_or_attach(client, merchant):
    created = create(client, merchant, mch_order_no="Q-1", amount=4321)[1]["data"]
    status, body = signed_post(client, merchant, QUERY, {"mch_order_no": "Q-1"})
    assert (status, body["code"]) == (200, "0")
    assert body["data"] == {"platform_order_no": created["platform_order_no"], "mch_order_no": "Q-1",
                            "amount": 4321, "currency": "PHP", "status": "CREATED"}


def test_query_by_platform_order_no_of_paid_order_has_paid_at_and_attach(client, merchant):
    created = create(client, merchant, mch_order_no="Q-2", attach=" keep  me ")[1]["data"]
    order = collection_notify_paid(platform_order_no=created["platform_order_no"])
    status, body = signed_post(client, merchant, QUERY, {"platform_order_no": created["platform_order_no"]})
    assert body["data"]["status"] == "SUCCESS"
    assert body["data"]["paid_at"] == int(order.paid_at.timestamp())
    assert body["data"]["attach"] == " keep  me "


def test_query_with_both_numbers_prefers_platform_order_no(client, merchant):
    first = create(client, merchant, mch_order_no="Q-3")[1]["data"]
    create(client, merchant, mch_order_no="Q-4")
    status, body = signed_post(client, merchant, QUERY,
                               {"platform_order_no": first["platform_order_no"], "mch_order_no": "Q-4"})
    assert body["data"]["mch_order_no"] == "Q-3"


def test_query_with_both_numbers_when_platform_order_no_unknown_is_2002(client, merchant):
    create(client, merchant, mch_order_no="Q-5")
    status, body = signed_post(client, merchant, QUERY, {"platform_order_no": "C000NOPE", "mch_order_no": "Q-5"})
    assert (status, body["code"]) == (404, "2002")


def test_query_without_any_number_returns_1000(client, merchant):
    status, body = signed_post(client, merchant, QUERY, {})
    assert (status, body["code"]) == (400, "1000")
    status, body = signed_post(client, merchant, QUERY, {"mch_order_no": "", "platform_order_no": ""})
    assert (status, body["code"]) == (400, "1000")


@pytest.mark.parametrize("params", [{"mch_order_no": "bad no"}, {"platform_order_no": "C-123"},
                                    {"platform_order_no": 5}, {"mch_order_no": "x" * 65}])
def test_query_with_number_out_of_format_returns_1000(client, merchant, params):
    status, body = signed_post(client, merchant, QUERY, params)
    assert (status, body["code"]) == (400, "1000")


@pytest.mark.parametrize("number, variant", [
    ("mch_order_no", "{}\n"), ("mch_order_no", " {} "), ("mch_order_no", "{} "),
    ("platform_order_no", "{}\n"), ("platform_order_no", " {}"), ("platform_order_no", "{}\t"),
])
def test_query_with_number_padded_by_whitespace_or_newline_returns_1000_not_the_order(client, merchant, number,
                                                                                          variant):
    created = create(client, merchant, mch_order_no="Q-WS")[1]["data"]
    status, body = signed_post(client, merchant, QUERY, {number: variant.format(created[number])})
    assert (status, body["code"], body["data"]) == (400, "1000", None), body
    assert number in body["msg"]


def test_query_of_unknown_order_returns_2002(client, merchant):
    for params in ({"mch_order_no": "NEVER"}, {"platform_order_no": "C2020NOPE"}):
        status, body = signed_post(client, merchant, QUERY, params)
        assert (status, body["code"], body["data"]) == (404, "2002", None)


def test_query_of_another_merchants_order_by_either_number_returns_2002(client, merchant, other_merchant):
    theirs = create(client, other_merchant, mch_order_no="THEIRS")[1]["data"]
    for params in ({"mch_order_no": "THEIRS"}, {"platform_order_no": theirs["platform_order_no"]}):
        status, body = signed_post(client, merchant, QUERY, params)
        assert (status, body["code"]) == (404, "2002")


@pytest.mark.parametrize("by", ["platform_order_no", "mch_order_no"])
def test_query_reads_the_order_alone(client, merchant, by):
    """pay/query answers from the order's own columns: one read, no join to the product or currency and
    no ORDER BY (each key matches one row; the joins and the ordering were half of its CPU)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    created = create(client, merchant, mch_order_no="Q-9", attach="a")[1]["data"]
    with CaptureQueriesContext(connection) as queries:
        status, body = signed_post(client, merchant, QUERY, {by: created[by]})
    assert (status, body["data"]["platform_order_no"], body["data"]["attach"]) == (200, created["platform_order_no"],
                                                                                  "a")
    reads = [q["sql"] for q in queries.captured_queries if '"collection_collectionorder"' in q["sql"]]
    assert len(reads) == 1 and " JOIN " not in reads[0] and " ORDER BY " not in reads[0], reads


def test_query_loads_only_the_columns_of_its_answer(client, merchant):
    """pay/query selects the seven columns its answer is made of, and a paid order's answer needs no second read
    (docs/performance.md, "Measured changes": compiling and loading all the order's columns was 0.2 ms of its CPU)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    created = create(client, merchant, mch_order_no="Q-10", attach="b")[1]["data"]
    order = collection_notify_paid(platform_order_no=created["platform_order_no"])
    with CaptureQueriesContext(connection) as queries:
        status, body = signed_post(client, merchant, QUERY, {"mch_order_no": "Q-10"})
    assert body["data"] == {"platform_order_no": created["platform_order_no"], "mch_order_no": "Q-10",
                            "amount": created["amount"], "currency": "PHP", "status": "SUCCESS",
                            "paid_at": int(order.paid_at.timestamp()), "attach": "b"}
    reads = [q["sql"] for q in queries.captured_queries if '"collection_collectionorder"' in q["sql"]]
    assert len(reads) == 1, reads
    selected = reads[0].split(" FROM ")[0]
    assert '"pay_token"' not in selected and '"route_reason"' not in selected and '"fee"' not in selected, selected


def test_answer_is_compact_utf8_json_with_line_separators_escaped_and_only_post_allowed(client, merchant):
    # The success envelope's bytes and headers as DRF's JSONRenderer gives them (SignedAPIView.answer renders it
    # without DRF's Response): no spaces, non-ASCII as UTF-8, U+2028/U+2029 escaped, Content-Type without charset.
    create(client, merchant, mch_order_no="Q-json", attach="café \u2028\u2029 ✓")
    response = client.post(QUERY, data=json.dumps(merchant.signed_body({"mch_order_no": "Q-json"})),
                           content_type="application/json")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json" and response["Allow"] == "POST"
    assert response.content.startswith(b'{"code":"0","msg":"OK","data":{"platform_order_no":"')
    assert '"attach":"café \\u2028\\u2029 ✓"}}'.encode() in response.content
