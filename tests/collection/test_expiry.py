"""Expiry (docs/api.md, "Collection orders"): a periodic task moves due CREATED orders to EXPIRED, idempotently."""

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from apps.collection.models import CollectionOrder
from apps.collection.services import collection_notify_paid
from apps.collection.tasks import expire_due_orders
from tests.collection.conftest import create_ok

pytestmark = pytest.mark.django_db


def test_expire_task_moves_only_due_created_orders(client, merchant):
    due = create_ok(client, merchant, expire_seconds=60)
    later = create_ok(client, merchant, expire_seconds=3600)
    paid = create_ok(client, merchant, expire_seconds=60)
    collection_notify_paid(platform_order_no=paid.platform_order_no)
    with time_machine.travel(timezone.now() + timedelta(seconds=61), tick=False):
        assert expire_due_orders() == 1
        assert expire_due_orders() == 0
    statuses = dict(CollectionOrder.objects.values_list("pk", "status"))
    assert statuses == {due.pk: "EXPIRED", later.pk: "CREATED", paid.pk: "SUCCESS"}


def test_order_expires_exactly_at_expire_at(client, merchant):
    order = create_ok(client, merchant, expire_seconds=60)
    with time_machine.travel(order.expire_at - timedelta(milliseconds=1), tick=False):
        assert expire_due_orders() == 0
    with time_machine.travel(order.expire_at, tick=False):
        assert expire_due_orders() == 1
