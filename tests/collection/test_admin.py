"""Admin of collection orders: search by either number, filters, read-only money, no add/delete."""

import pytest
from bs4 import BeautifulSoup

from tests.collection.conftest import create_ok

pytestmark = pytest.mark.django_db
CHANGELIST = "/admin/collection/collectionorder/"


def listed(response) -> set[str]:
    page = BeautifulSoup(response.content, "html.parser")
    # The list shows an order number's head and tail, the whole number in the tooltip (fits 1280 px).
    return {(a.select_one("span[title]") or a).get("title") or a.get_text(strip=True)
            for a in page.select("#result_list tbody th a")}


def test_admin_finds_orders_by_either_number(admin_client, client, merchant, other_merchant):
    mine = create_ok(client, merchant, mch_order_no="FIND-ME")
    theirs = create_ok(client, other_merchant, mch_order_no="OTHER-1")
    assert listed(admin_client.get(CHANGELIST, {"q": "FIND-ME"})) == {mine.platform_order_no}
    assert listed(admin_client.get(CHANGELIST, {"q": theirs.platform_order_no})) == {theirs.platform_order_no}


def test_admin_filters_by_merchant_status_and_date(admin_client, client, merchant, other_merchant):
    from apps.collection.services import collection_notify_paid

    mine = create_ok(client, merchant)
    paid = create_ok(client, merchant)
    collection_notify_paid(platform_order_no=paid.platform_order_no)
    theirs = create_ok(client, other_merchant)
    # By merchant: its number in the search box (no merchant filter column: a list of every merchant).
    assert listed(admin_client.get(CHANGELIST, {"q": other_merchant.merchant_no})) == \
        {theirs.platform_order_no}
    assert listed(admin_client.get(CHANGELIST, {"status__exact": "SUCCESS"})) == {paid.platform_order_no}
    day = mine.created_at
    response = admin_client.get(CHANGELIST, {"created_at__year": day.year, "created_at__month": day.month,
                                             "created_at__day": day.day})
    assert listed(response) == {mine.platform_order_no, paid.platform_order_no, theirs.platform_order_no}


def test_admin_shows_order_read_only_without_add_or_delete(admin_client, client, merchant):
    order = create_ok(client, merchant, amount=4321)
    change = admin_client.get(f"{CHANGELIST}{order.pk}/change/")
    assert change.status_code == 200
    page = BeautifulSoup(change.content, "html.parser")
    for field in ("amount", "fee", "currency", "status", "mch_order_no"):
        assert page.find(attrs={"name": field}) is None, field  # shown, not editable
    assert admin_client.get(f"{CHANGELIST}add/").status_code == 403
    assert admin_client.get(f"{CHANGELIST}{order.pk}/delete/").status_code == 403
    before = (order.amount, order.status)
    admin_client.post(f"{CHANGELIST}{order.pk}/change/", {"amount": 1, "status": "SUCCESS"})
    order.refresh_from_db()
    assert (order.amount, order.status) == before


def paid_with_refunds(client, ctx):
    from apps.collection.refunds import OUTCOME_FAILED, refund_channel_result, refund_create
    from apps.collection.services import collection_notify_paid

    order = create_ok(client, ctx, product_code="PHP_COLLECT_D0", amount=100_000)
    collection_notify_paid(platform_order_no=order.platform_order_no)
    first = refund_create(merchant=ctx.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-ADMIN-1",
                          amount=30_000)
    second = refund_create(merchant=ctx.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-ADMIN-2",
                           amount=1_099)
    refund_channel_result(refund_no=second.refund_no, outcome=OUTCOME_FAILED, fail_reason="sandbox rule")
    return order, first, second


def test_admin_lists_refunds_searchable_by_either_number_and_by_the_pay_in(admin_client, client, merchant,
                                                                          other_merchant):
    order, first, second = paid_with_refunds(client, merchant)
    _, theirs, _ = paid_with_refunds(client, other_merchant)
    refunds = "/admin/collection/refund/"
    assert listed(admin_client.get(refunds, {"q": "RF-ADMIN-1"})) == {first.refund_no, theirs.refund_no}
    assert listed(admin_client.get(refunds, {"q": second.refund_no})) == {second.refund_no}
    assert listed(admin_client.get(refunds, {"q": order.platform_order_no})) == {first.refund_no, second.refund_no}
    assert listed(admin_client.get(refunds, {"q": other_merchant.merchant_no})) == {
        r.refund_no for r in theirs.order.refunds.all()}
    assert listed(admin_client.get(refunds, {"status__exact": "FAILED", "q": merchant.merchant_no})) == {
        second.refund_no}


def test_a_refund_in_the_admin_is_read_only(admin_client, client, merchant):
    _, refund, _ = paid_with_refunds(client, merchant)
    page = admin_client.get(f"/admin/collection/refund/{refund.pk}/change/")
    assert page.status_code == 200
    assert BeautifulSoup(page.content, "html.parser").find(attrs={"name": "amount"}) is None
    assert admin_client.get("/admin/collection/refund/add/").status_code == 403
    assert admin_client.get(f"/admin/collection/refund/{refund.pk}/delete/").status_code == 403
    admin_client.post(f"/admin/collection/refund/{refund.pk}/change/", {"amount": 1, "status": "SUCCESS"})
    refund.refresh_from_db()
    assert (refund.amount, refund.status) == (30_000, "PROCESSING")


def test_the_pay_ins_page_shows_its_refunds(admin_client, client, merchant):
    order, first, second = paid_with_refunds(client, merchant)
    page = BeautifulSoup(admin_client.get(f"{CHANGELIST}{order.pk}/change/").content, "html.parser")
    rows = [row.get_text(" ", strip=True) for row in page.select(".inline-related tbody tr")]
    assert any(first.refund_no in row and "Processing" in row and "RF-ADMIN-1" in row for row in rows), rows
    assert any(second.refund_no in row and "Failed" in row and "sandbox rule" in row for row in rows), rows
