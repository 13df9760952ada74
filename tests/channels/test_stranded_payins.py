"""A pay-in whose upstream opening task was lost (broker or worker gone after pay/create committed) is opened by the
sweeper, once: the payer who comes later is forwarded to the invoice opened then (docs/collections.md)."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from apps.channels.models import UpstreamPayin
from apps.collection import tasks
from apps.collection.models import CollectionOrder
from apps.operations.selectors import stranded_orders
from tests.collection.conftest import create_ok

pytestmark = pytest.mark.django_db


def stuck(kind: str) -> int:
    return next(figure.count for figure in stranded_orders() if figure.kind.name == kind)


def test_a_payin_whose_opening_task_was_lost_is_opened_by_the_sweeper(xendit_channels, merchant, xendit_emulator,
                                                                      monkeypatch):
    queued = []
    monkeypatch.setattr(tasks.open_upstream_payin, "delay", queued.append)
    order = create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=150000)
    fresh = create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=150000)
    # pay/create's opening was queued on commit and lost (this test's transaction never commits: nothing queued).
    CollectionOrder.objects.filter(pk=order.pk).update(created_at=timezone.now() - timedelta(minutes=1))
    assert stuck("payin.unopened") == 1 and queued == []

    assert tasks.sweep_stranded_payins() == 1

    assert queued == [order.platform_order_no]  # the fresh one is its own task's, still on its way
    tasks.open_upstream_payin(order.platform_order_no)  # what the worker then runs
    [invoice] = xendit_emulator.invoice_by_external_id(order.platform_order_no)
    assert UpstreamPayin.objects.get(platform_order_no=order.platform_order_no).reference == invoice["id"]
    assert stuck("payin.unopened") == 0
    assert tasks.sweep_stranded_payins() == 0 and queued == [order.platform_order_no]
    response = Client().get(f"/pay/{order.pay_token}")
    assert (response.status_code, response["Location"]) == (302, invoice["invoice_url"])
    assert not UpstreamPayin.objects.filter(platform_order_no=fresh.platform_order_no).exists()


def test_an_expired_payin_is_not_opened(xendit_channels, merchant, monkeypatch):
    queued = []
    monkeypatch.setattr(tasks.open_upstream_payin, "delay", queued.append)
    order = create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=150000)
    CollectionOrder.objects.filter(pk=order.pk).update(created_at=timezone.now() - timedelta(hours=1),
                                                       expire_at=timezone.now() - timedelta(seconds=1))
    assert tasks.sweep_stranded_payins() == 0 and queued == []
    assert stuck("payin.unopened") == 0


def test_an_upstream_payment_still_unknown_long_after_expiry_is_stuck_until_reconciliation_learns_it(
        xendit_channels, merchant, xendit_emulator):
    from apps.channels.tasks import reconcile_channels

    order = create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=150000)
    Client().get(f"/pay/{order.pay_token}")  # the payer opened the invoice
    [invoice] = xendit_emulator.invoice_by_external_id(order.platform_order_no)
    CollectionOrder.objects.filter(pk=order.pk).update(expire_at=timezone.now() - timedelta(minutes=10))
    assert stuck("payin.upstream_unresolved") == 0  # reconciliation's to ask
    CollectionOrder.objects.filter(pk=order.pk).update(expire_at=timezone.now() - timedelta(minutes=40))
    assert stuck("payin.upstream_unresolved") == 1  # paid or not? nobody knows yet: a person looks

    xendit_emulator.expire_invoice(invoice["id"])
    assert reconcile_channels()["payins"]["expired"] == [order.platform_order_no]

    assert stuck("payin.upstream_unresolved") == 0
    assert CollectionOrder.objects.get(pk=order.pk).status == "EXPIRED"
