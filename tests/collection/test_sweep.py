"""Stranded pay-ins (docs/collections.md, "Stranded pay-ins"): an order past expiry that was not expired and a D1
credit whose release day came and went are counted as stuck until their periodic task finishes them."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from apps.collection.models import CollectionOrder
from apps.collection.services import collection_notify_paid
from apps.collection.tasks import expire_due_orders, release_settlement
from apps.operations.selectors import stranded_orders
from tests.collection.conftest import balances, create_ok

pytestmark = pytest.mark.django_db


def stuck(kind: str) -> int:
    return next(figure.count for figure in stranded_orders() if figure.kind.name == kind)


def test_an_order_past_expiry_is_stuck_until_the_expiry_task_expires_it(merchant):
    late = create_ok(Client(), merchant, product_code="PHP_COLLECT_D0")
    just_expired = create_ok(Client(), merchant, product_code="PHP_COLLECT_D0")
    CollectionOrder.objects.filter(pk=late.pk).update(expire_at=timezone.now() - timedelta(minutes=10))
    CollectionOrder.objects.filter(pk=just_expired.pk).update(expire_at=timezone.now() - timedelta(seconds=5))
    assert stuck("payin.unexpired") == 1  # the expiry task runs every 10 s: five seconds late is not stuck

    assert expire_due_orders() == 2

    assert stuck("payin.unexpired") == 0
    assert CollectionOrder.objects.get(pk=late.pk).status == "EXPIRED"


def test_a_d1_credit_whose_release_day_passed_is_stuck_until_the_release_moves_it(merchant):
    order = create_ok(Client(), merchant, product_code="PHP_COLLECT_D1", amount=10_000)
    collection_notify_paid(platform_order_no=order.platform_order_no, paid_at=timezone.now() - timedelta(days=2))
    today = create_ok(Client(), merchant, product_code="PHP_COLLECT_D1", amount=10_000)
    collection_notify_paid(platform_order_no=today.platform_order_no)
    assert stuck("payin.unreleased") == 1  # today's credit is released tomorrow: not due, not stuck
    assert balances(merchant)["settling"] == 2 * order.net_amount

    release_settlement()

    assert stuck("payin.unreleased") == 0
    assert balances(merchant)["settling"] == today.net_amount
