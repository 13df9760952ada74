"""pay/create writes an entry only into the indexes a query reads (docs/ledger.md, "Indexes on the hot write tables";
docs/performance.md, "Measured changes"), and the admin's filters on paid and finished orders still read an index."""

import json
import re

from django.db import connection

from apps.collection.models import CollectionOrder, new_platform_order_no, random_alphanumerics
from apps.collection.services import collection_create, collection_notify_paid

# Every index a CREATED order enters, and what reads it.
WRITTEN_BY_A_CREATE = {
    "collection_collectionorder_pkey",  # the primary key
    "collection_platform_order_no_unique", "collection_pay_token_unique", "collection_mch_order_no_unique",  # keys
    "collection_collectionorder_product_id_6fe40249",  # a product's delete (PROTECT)
    "collection_collectionorder_channel_id_c5a31879",  # a channel's orders (its page), its delete (PROTECT)
    "collection_created_cover_idx",  # created_at ranges: admin, the operations overview
    "collection_open_by_expiry",  # expiry, stranded counts, the admin's CREATED filter
    "collection_by_merchant_created",  # the merchant portal's lists
}


def _indexes_holding(order_id: int) -> set[str]:
    """The collection order table's indexes whose predicate (if any) admits that row."""
    with connection.cursor() as cursor:
        cursor.execute("""SELECT c.relname, pg_get_expr(i.indpred, i.indrelid) FROM pg_index i
                          JOIN pg_class c ON c.oid = i.indexrelid
                          WHERE i.indrelid = 'collection_collectionorder'::regclass""")
        indexes = cursor.fetchall()
        held = set()
        for name, predicate in indexes:
            cursor.execute(f"SELECT EXISTS (SELECT 1 FROM collection_collectionorder WHERE id = %s AND ({predicate or 'true'}))",
                           [order_id])
            if cursor.fetchone()[0]:
                held.add(name)
    return held


def test_a_created_order_enters_only_the_indexes_a_query_reads(merchant):
    order = collection_create(merchant=merchant.merchant, mch_order_no="IDX-1", product_code="PHP_COLLECT_D1",
                              amount=10000, currency="PHP")
    assert _indexes_holding(order.pk) == WRITTEN_BY_A_CREATE
    collection_notify_paid(platform_order_no=order.platform_order_no)  # paid: the admin's filters find it
    assert _indexes_holding(order.pk) - WRITTEN_BY_A_CREATE == {"collection_finished_status_idx",
                                                                "collection_paid_at_idx", "collection_d1_unreleased"}


def _plan_indexes(queryset) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a small table: ask which index the query can take
    plan = json.loads(queryset.explain(format="json"))[0]["Plan"]

    def nodes(node):
        yield node
        for child in node.get("Plans", []):
            yield from nodes(child)
    return {node["Index Name"] for node in nodes(plan) if "Index Name" in node}


def test_the_admins_status_and_paid_filters_still_read_an_index(merchant):
    from datetime import timedelta

    from django.utils import timezone

    order = collection_create(merchant=merchant.merchant, mch_order_no="IDX-2", product_code="PHP_COLLECT_D1",
                              amount=10000, currency="PHP")
    collection_notify_paid(platform_order_no=order.platform_order_no)
    now = timezone.now()
    orders = CollectionOrder.objects.order_by()
    assert "collection_finished_status_idx" in _plan_indexes(orders.filter(status="EXPIRED"))
    assert "collection_open_by_expiry" in _plan_indexes(orders.filter(status="CREATED"))
    assert "collection_paid_at_idx" in _plan_indexes(orders.filter(paid_at__gte=now - timedelta(days=7),
                                                                    paid_at__lt=now + timedelta(days=1)))


def test_platform_order_numbers_keep_their_form_and_draw_every_character_alike():
    assert re.fullmatch(r"C\d{14}[A-Za-z0-9]{16}", new_platform_order_no())
    drawn = "".join(random_alphanumerics(16) for _ in range(4000))  # 64,000 characters, ~1,032 of each
    counts = [drawn.count(char) for char in set(drawn)]
    assert len(counts) == 62 and len(drawn) == 64_000
    expected = len(drawn) / 62
    chi_square = sum((count - expected) ** 2 / expected for count in counts)
    assert chi_square < 120  # 61 degrees of freedom: p < 1e-5 above this; byte % 62 without the rejection gives ~420
