"""A page of a merchant's list in the portal costs one page of index entries: neither another merchant's volume nor
the merchant's own enters the plan (EXPLAIN ANALYZE where one merchant has 20,000 pay-ins and payouts), and no
sort of the merchant's whole history precedes the first page."""

import json

from django.db import connection

from apps.collection.models import CollectionOrder
from apps.payout.models import Payout
from apps.portal import selectors

VOLUME = 20_000


def _clone(model, source, *, overrides: dict[str, str]) -> None:
    """VOLUME copies of one order row, made unique by `overrides` (column -> SQL expression over g), backdated."""
    table = model._meta.db_table
    columns = [field.column for field in model._meta.concrete_fields if field.column != "id"]
    values = [overrides.get(column, "now() - g * interval '1 second'" if column == "created_at" else f'"{column}"')
              for column in columns]
    with connection.cursor() as cursor:
        cursor.execute(f'INSERT INTO {table} ({", ".join(columns)}) SELECT {", ".join(values)} '
                       f"FROM {table}, generate_series(1, %s) g WHERE id = %s", [VOLUME, source.pk])
        cursor.execute(f"ANALYZE {table}")


def _plan(queryset) -> dict:
    return json.loads(queryset.explain(format="json", analyze=True, buffers=True))[0]["Plan"]


def _nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def test_a_page_of_a_merchants_list_reads_one_page_whatever_the_volume(shops):
    a, b = shops
    _clone(CollectionOrder, b.payin, overrides={"platform_order_no": "platform_order_no || '-' || g",
                                                "mch_order_no": "mch_order_no || '-' || g",
                                                "pay_token": "pay_token || '-' || g"})
    _clone(Payout, b.payout, overrides={"platform_order_no": "platform_order_no || '-' || g",
                                        "mch_order_no": "mch_order_no || '-' || g", "hold_id": "NULL",
                                        "upstream_reference": "upstream_reference || '-' || g"})
    flt = selectors.OrderFilter()
    for merchant in (a.merchant, b.merchant):  # the small one, and the one with 20,000 of each
        for name, queryset, index in (
                ("pay-ins", selectors.payins(merchant_id=merchant.pk, flt=flt), "collection_by_merchant_created"),
                ("payouts", selectors.payouts(merchant_id=merchant.pk, flt=flt), "payout_by_merchant_created")):
            page, cursor = selectors.page(queryset, size=50)
            for sliced in (queryset[:51], selectors.page_queryset(queryset, cursor=cursor)[:51]):
                nodes = list(_nodes(_plan(sliced)))
                assert index in {node.get("Index Name") for node in nodes}, (merchant, name, nodes[0])
                assert "Sort" not in {node["Node Type"] for node in nodes}, (merchant, name, nodes[0])
                read = sum(node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0) for node in nodes
                           if node.get("Relation Name"))
                assert read <= 2 * 51 + 5, (merchant, name, read)  # one page (and the currency join), not 20,000
