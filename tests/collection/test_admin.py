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
