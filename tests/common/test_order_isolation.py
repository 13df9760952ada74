"""Another merchant's order is never visible: querying it by either number is indistinguishable from querying
an order that does not exist (docs/api.md, "Error codes": 2002), so the API is no oracle for which order numbers
exist."""

import pytest

from apps.collection.services import collection_create, collection_notify_paid
from apps.ledger.services import balance_adjust
from apps.payout.services import payout_create
from tests.helpers import signed_post

pytestmark = pytest.mark.django_db

PAY_QUERY = "/openapi/v1/pay/query"
PAYOUT_QUERY = "/openapi/v1/payout/query"


def their_collection(ctx):
    order = collection_create(merchant=ctx.merchant, mch_order_no="THEIRS-C1", product_code="PHP_COLLECT_D0",
                              amount=10_000, currency="PHP", attach="secret attach")
    collection_notify_paid(platform_order_no=order.platform_order_no)
    return order


def their_payout(ctx):
    balance_adjust(merchant_no=ctx.merchant_no, currency="PHP", amount=1_000_000, reason="test funds")
    return payout_create(merchant=ctx.merchant, mch_order_no="THEIRS-P1", product_code="PHP_PAYOUT", amount=10_000,
                         currency="PHP", payee_name="Payee", payee_account="0012345678", bank_code="BDO")


def unknown_like(platform_order_no: str) -> str:
    """A well-formed number of the same shape that belongs to no order."""
    return platform_order_no[:-4] + ("0000" if not platform_order_no.endswith("0000") else "1111")


@pytest.mark.parametrize("path, make", [(PAY_QUERY, their_collection), (PAYOUT_QUERY, their_payout)],
                         ids=["pay", "payout"])
def test_another_merchants_order_looks_exactly_like_an_unknown_one(client, merchant, other_merchant, path, make):
    theirs = make(other_merchant)
    # The owner sees it: the numbers used below are real ones.
    for numbers in ({"platform_order_no": theirs.platform_order_no}, {"mch_order_no": theirs.mch_order_no}):
        status, body = signed_post(client, other_merchant, path, numbers)
        assert (status, body["code"], body["data"]["platform_order_no"]) == (200, "0", theirs.platform_order_no)

    unknown_by_platform = client.post(path, merchant.signed_body({"platform_order_no": unknown_like(
        theirs.platform_order_no)}), content_type="application/json")
    unknown_by_mch = client.post(path, merchant.signed_body({"mch_order_no": "NEVER-USED-1"}),
                                 content_type="application/json")
    assert (unknown_by_platform.status_code, unknown_by_platform.json()["code"]) == (404, "2002")

    for numbers, unknown in (({"platform_order_no": theirs.platform_order_no}, unknown_by_platform),
                             ({"mch_order_no": theirs.mch_order_no}, unknown_by_mch)):
        response = client.post(path, merchant.signed_body(numbers), content_type="application/json")
        # Same status, same body byte for byte, same content type: nothing tells "exists elsewhere" apart.
        assert (response.status_code, response.content, response["Content-Type"]) == (
            unknown.status_code, unknown.content, unknown["Content-Type"])
        assert theirs.platform_order_no.encode() not in response.content


@pytest.mark.parametrize("path, make", [(PAY_QUERY, their_collection), (PAYOUT_QUERY, their_payout)],
                         ids=["pay", "payout"])
def test_platform_number_of_another_merchant_wins_over_my_own_mch_number_and_is_not_found(
        client, merchant, other_merchant, path, make):
    """docs/api.md, "Endpoints": platform_order_no takes precedence; pairing theirs with my own order number leaks
    nothing."""
    theirs = make(other_merchant)
    mine = make(merchant)  # same mch_order_no at my merchant: a different order
    assert mine.platform_order_no != theirs.platform_order_no
    status, body = signed_post(client, merchant, path, {"platform_order_no": theirs.platform_order_no,
                                                        "mch_order_no": mine.mch_order_no})
    assert (status, body["code"], body["data"]) == (404, "2002", None)
    # And my platform number with their mch number is my order, never theirs.
    status, body = signed_post(client, merchant, path, {"platform_order_no": mine.platform_order_no,
                                                        "mch_order_no": theirs.mch_order_no})
    assert (status, body["data"]["platform_order_no"]) == (200, mine.platform_order_no)


def test_collection_number_queried_as_a_payout_and_back_is_not_found(client, merchant):
    """The two order kinds do not leak into each other either."""
    collection = their_collection(merchant)
    payout = their_payout(merchant)
    status, body = signed_post(client, merchant, PAYOUT_QUERY, {"platform_order_no": collection.platform_order_no})
    assert (status, body["code"]) == (404, "2002")
    status, body = signed_post(client, merchant, PAY_QUERY, {"platform_order_no": payout.platform_order_no})
    assert (status, body["code"]) == (404, "2002")


def test_another_merchants_refund_and_order_look_exactly_like_unknown_ones(client, merchant, other_merchant):
    from apps.collection.refunds import refund_create

    order = their_collection(other_merchant)
    refund = refund_create(merchant=other_merchant.merchant, mch_order_no=order.mch_order_no,
                           mch_refund_no="THEIRS-R1", amount=1_000)
    for path, numbers, unknown in (
            ("/openapi/v1/refund/query", {"refund_no": refund.refund_no}, {"refund_no": unknown_like(refund.refund_no)}),
            ("/openapi/v1/refund/query", {"mch_refund_no": "THEIRS-R1"}, {"mch_refund_no": "NEVER-USED-1"}),
            ("/openapi/v1/refund/create", {"platform_order_no": order.platform_order_no, "mch_refund_no": "MINE-1",
                                           "amount": 1}, {"platform_order_no": unknown_like(order.platform_order_no),
                                                          "mch_refund_no": "MINE-1", "amount": 1})):
        theirs = client.post(path, merchant.signed_body(numbers), content_type="application/json")
        missing = client.post(path, merchant.signed_body(unknown), content_type="application/json")
        assert (missing.status_code, missing.json()["code"]) == (404, "2002")
        assert (theirs.status_code, theirs.content) == (missing.status_code, missing.content)
