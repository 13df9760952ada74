"""Refunds asked for in the portal, seen by our staff (docs/portal.md, "Refunds"; docs/back-office.md): an approved
request left without its refund is counted as stuck on the overview and in payments_stuck_orders until the sweep
makes the refund; requests are listed and searchable in the admin, read only; the pay-in's admin page lists its
refunds, the portal's among them."""

from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from django.utils import timezone

from apps.collection.models import Refund
from apps.operations.selectors import stranded_orders
from apps.portal import refunds as services
from apps.portal.models import RefundRequest
from tests.collection.test_admin import listed
from tests.collection.test_refunds import paid_order

pytestmark = pytest.mark.django_db


def approved_but_lost(client, merchant, team, minutes_ago: int = 3) -> RefundRequest:
    """A request whose approval committed and whose refund was never made (its web request died in between)."""
    order = paid_order(client, merchant, amount=100_000)
    request = services.refund_request_create(actor=team["finance"], platform_order_no=order.platform_order_no,
                                             amount=25_000, reason="lost")
    services._approve(actor=team["owner"], request_id=request.pk)
    RefundRequest.objects.filter(pk=request.pk).update(decided_at=timezone.now() - timedelta(minutes=minutes_ago))
    return request


def stuck() -> int:
    return {figure.kind.name: figure.count for figure in stranded_orders()}["refund_request.unrecorded"]


def test_an_approved_request_without_its_refund_is_stuck_until_the_sweep_makes_it(client, merchant, team):
    from config.metrics import stuck_order_gauges

    request = approved_but_lost(client, merchant, team)
    assert stuck() == 1
    gauge = next(stuck_order_gauges())
    assert sum(sample.value for sample in gauge.samples if sample.labels["kind"] == "refund_request.unrecorded") == 1
    assert services.refund_requests_resume() == [request.pk]
    request.refresh_from_db()
    assert request.status == RefundRequest.Status.DONE and request.refund.amount == 25_000
    assert stuck() == 0 and services.refund_requests_resume() == []
    assert Refund.objects.count() == 1


def test_a_fresh_approval_is_not_stuck_yet(client, merchant, team):
    approved_but_lost(client, merchant, team, minutes_ago=0)
    assert stuck() == 0 and services.refund_requests_resume() == []


def test_staff_find_requests_by_any_number_and_the_pay_in_lists_the_portals_refund(admin_client, client, merchant,
                                                                                    team):
    order = paid_order(client, merchant, amount=100_000)
    request = services.refund_request_create(actor=team["finance"], platform_order_no=order.platform_order_no,
                                             amount=10_000, reason="staff can see")
    request = services.refund_request_approve(actor=team["owner"], request_id=request.pk,
                                              otp_code=team["owner"].code())
    url = "/admin/portal/refundrequest/"
    for number in (request.mch_refund_no, request.refund.refund_no, order.mch_order_no, order.platform_order_no):
        assert listed(admin_client.get(url, {"q": number})) == {str(request.pk)}, number
    assert listed(admin_client.get(url, {"q": "nothing"})) == set()
    assert admin_client.get(f"{url}{request.pk}/change/").status_code == 200
    assert admin_client.get(f"{url}add/").status_code == 403
    refunds = listed(admin_client.get("/admin/collection/refund/", {"q": request.mch_refund_no}))
    assert refunds == {request.refund.refund_no}
    page = BeautifulSoup(admin_client.get(f"/admin/collection/collectionorder/{order.pk}/change/").content,
                         "html.parser")
    assert request.refund.refund_no in page.get_text() and request.mch_refund_no in page.get_text()
