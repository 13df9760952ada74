"""pay/create inserts the order with a named query (apps/collection/services.py, `_ORDER_INSERT`; docs/performance.md,
"Measured changes"): it must write every column the model has, and the row it writes must be the order it answers
with, as `save()` would."""

import re

import pytest
from django.db import IntegrityError, transaction

from apps.collection import services
from apps.collection.models import CollectionOrder
from apps.collection.services import collection_create


def test_the_order_insert_names_every_column_of_the_model_but_the_id():
    """A field added to CollectionOrder fails here until the named INSERT writes it too."""
    columns = re.search(r"\((.*?)\)\s*VALUES", services._ORDER_INSERT, re.S).group(1)
    named = [column.strip() for column in columns.split(",")]
    model_columns = [field.column for field in CollectionOrder._meta.concrete_fields if not field.primary_key]
    assert named == model_columns
    assert services._ORDER_INSERT.count("%s") == len(model_columns)


def test_a_created_order_is_the_row_it_wrote(merchant):
    order = collection_create(merchant=merchant.merchant, mch_order_no="INS-1", product_code="PHP_COLLECT_D1",
                              amount=10000, currency="PHP", subject="s", return_url="https://example.com/r",
                              attach="a=1", expire_seconds=900)
    assert not order._state.adding and order._state.db == "default"
    stored = CollectionOrder.objects.get(pk=order.pk)
    for field in CollectionOrder._meta.concrete_fields:
        assert getattr(stored, field.attname) == getattr(order, field.attname), field.attname
    assert stored.status == CollectionOrder.Status.CREATED and stored.paid_at is None and stored.settled_at is None
    assert stored.created_at == stored.updated_at and stored.expire_at > stored.created_at


def test_a_second_insert_of_the_same_mch_order_no_is_an_integrity_error(merchant):
    collection_create(merchant=merchant.merchant, mch_order_no="INS-2", product_code="PHP_COLLECT_D1", amount=10000,
                      currency="PHP")
    order = CollectionOrder.objects.get(mch_order_no="INS-2")
    again = CollectionOrder(merchant_id=order.merchant_id, mch_order_no="INS-2", product_id=order.product_id,
                            settlement=order.settlement, channel_id=order.channel_id, currency_id="PHP", amount=10000,
                            fee=order.fee, expire_at=order.expire_at)
    with pytest.raises(IntegrityError), transaction.atomic():
        services._order_insert(again)
