"""GET /metrics: internal only, and it counts what just happened."""

import pytest
from django.test import override_settings

from apps.callbacks.enqueue import callback_enqueue
from apps.callbacks.metrics import attempt_counted
from apps.callbacks.models import CallbackEvent
from apps.payout.models import Payout
from tests.helpers import scrape, value
from tests.payout.conftest import PHP_THRESHOLD, create, fund

pytestmark = pytest.mark.django_db


def test_a_client_outside_the_allowed_networks_gets_a_404(client):
    assert client.get("/metrics", REMOTE_ADDR="203.0.113.9").status_code == 404
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 404  # private, but not listed by default


@pytest.mark.parametrize("header", [{"HTTP_X_FORWARDED_FOR": "203.0.113.9"},
                                    {"HTTP_X_FORWARDED_FOR": "127.0.0.1, 203.0.113.9"},
                                    {"HTTP_X_REAL_IP": "203.0.113.9"},
                                    {"HTTP_FORWARDED": "for=203.0.113.9;proto=https"},
                                    {"HTTP_FORWARDED": 'for="[2001:db8::1]:4711"'},
                                    {"HTTP_X_FORWARDED_FOR": "not-an-address"}])
def test_an_outside_client_through_a_reverse_proxy_on_the_same_host_gets_a_404(client, header):
    # nginx on 127.0.0.1 in front of gunicorn: the peer is loopback for everyone; the forwarded address decides.
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", **header).status_code == 404


def test_a_forwarded_request_from_an_allowed_address_is_let_in(client):
    scrape(client, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="127.0.0.1", HTTP_FORWARDED="for=127.0.0.1")


@override_settings(METRICS_TOKEN="s3cret-metrics-token")
def test_the_token_lets_a_forwarded_outside_client_in(client):
    scrape(client, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.9",
           headers={"Authorization": "Bearer s3cret-metrics-token"})


@override_settings(METRICS_TOKEN="s3cret-metrics-token")
def test_a_wrong_token_gets_a_404_and_the_right_one_is_let_in(client):
    outside = {"REMOTE_ADDR": "203.0.113.9"}
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}, **outside).status_code == 404
    assert client.get("/metrics", headers={"Authorization": "s3cret-metrics-token"}, **outside).status_code == 404
    scrape(client, headers={"Authorization": "Bearer s3cret-metrics-token"}, **outside)


@override_settings(METRICS_ALLOWED_NETWORKS=["10.0.0.0/8"])
def test_a_listed_private_network_is_let_in(client):
    scrape(client, REMOTE_ADDR="10.1.2.3")
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 404


def test_a_signed_payout_create_raises_the_request_count_of_its_route_and_code(client, merchant):
    route = {"route": "openapi/v1/payout/create", "method": "POST", "status": "200"}
    before = value(scrape(client), "payments_http_request_duration_seconds_count", **route)
    fund(merchant, 100_000_000)
    status, body = create(client, merchant)
    assert (status, body["code"]) == (200, "0")
    after = scrape(client)
    assert value(after, "payments_http_request_duration_seconds_count", **route) == before + 1
    assert body["data"]["platform_order_no"] not in after  # routes, never raw paths or order numbers


def test_a_frozen_payout_raises_the_review_queue_gauge(client, merchant):
    before = scrape(client)
    assert value(before, "payments_payout_review_queue") == 0
    fund(merchant, 100_000_000)
    status, body = create(client, merchant, amount=PHP_THRESHOLD + 1)
    assert Payout.objects.get().status == Payout.Status.FROZEN
    after = scrape(client)
    assert value(after, "payments_payout_review_queue") == 1
    assert value(after, "payments_payout_orders", status="FROZEN") == 1


def test_a_dead_callback_raises_the_dead_gauge(client, merchant):
    assert value(scrape(client), "payments_callbacks_dead") == 0
    event = callback_enqueue(merchant=merchant.merchant, type=CallbackEvent.Type.COLLECTION_SUCCESS,
                             platform_order_no="C1", payload={"platform_order_no": "C1"})
    CallbackEvent.objects.filter(pk=event.pk).update(status=CallbackEvent.Status.DEAD, next_attempt_at=None)
    after = scrape(client)
    assert value(after, "payments_callbacks_dead") == 1
    attempt_counted(event=CallbackEvent.objects.get(pk=event.pk), success=False)
    assert value(scrape(client), "payments_callback_attempts_total", outcome="dead") >= 1


def test_a_pay_page_is_counted_by_its_pattern_not_its_token(client):
    client.get("/pay/tok-SECRETISH-123456")
    text = scrape(client)
    assert "tok-SECRETISH-123456" not in text
    assert value(text, "payments_http_request_duration_seconds_count", route="pay/<pay_token>") >= 1


def test_an_unknown_api_path_is_counted_under_the_apis_catch_all_not_its_path(client):
    client.post("/openapi/v1/no-such-thing-42", data="{}", content_type="application/json")
    text = scrape(client)
    assert "no-such-thing-42" not in text
    assert value(text, "payments_http_request_duration_seconds_count", route="openapi/v1/*", status="404") >= 1


def test_a_due_callback_raises_the_due_gauge_and_a_delivery_is_timed(client, merchant):
    assert value(scrape(client), "payments_callbacks_due") == 0
    event = callback_enqueue(merchant=merchant.merchant, type=CallbackEvent.Type.COLLECTION_SUCCESS,
                             platform_order_no="C2", payload={"platform_order_no": "C2"})
    CallbackEvent.objects.filter(pk=event.pk).update(next_attempt_at=event.created_at)
    assert value(scrape(client), "payments_callbacks_due") == 1

    before = value(scrape(client), "payments_callback_delivery_seconds_count")
    delivered = value(scrape(client), "payments_callback_attempts_total", outcome="delivered")
    CallbackEvent.objects.filter(pk=event.pk).update(status=CallbackEvent.Status.DELIVERED,
                                                      delivered_at=event.created_at)
    attempt_counted(event=CallbackEvent.objects.get(pk=event.pk), success=True)
    text = scrape(client)
    assert value(text, "payments_callback_delivery_seconds_count") == before + 1
    assert value(text, "payments_callback_attempts_total", outcome="delivered") == delivered + 1
    assert value(text, "payments_callbacks_due") == 0


def test_a_stuck_payout_raises_the_stuck_gauge_of_its_kind_until_the_sweeper_finishes_it(client, merchant,
                                                                                          monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from apps.channels import sandbox_payout
    from apps.channels.models import SandboxDisbursement
    from apps.payout.services import payout_submit
    from apps.payout.tasks import sweep_stuck_payouts
    from tests.payout.conftest import new_payout

    kind = {"kind": "payout.sandbox_unanswered"}
    handed = value(scrape(client), "payments_stuck_orders_handed_total", **kind)
    monkeypatch.setattr(sandbox_payout.sandbox_payout_settle, "apply_async", lambda **kwargs: None)  # lost
    fund(merchant, 100_000_000)
    payout = payout_submit(payout_id=new_payout(merchant).pk)
    long_ago = timezone.now() - timedelta(minutes=90)
    Payout.objects.filter(pk=payout.pk).update(submitted_at=long_ago)
    SandboxDisbursement.objects.filter(platform_order_no=payout.platform_order_no).update(created_at=long_ago)
    before = scrape(client)
    assert value(before, "payments_stuck_orders", age="over_1h", critical="false", **kind) == 1
    assert value(before, "payments_stuck_orders", age="under_5m", **kind) == 0
    assert 90 * 60 <= value(before, "payments_stuck_orders_oldest_seconds", **kind) < 91 * 60

    sweep_stuck_payouts()

    after = scrape(client)
    assert value(after, "payments_stuck_orders", age="over_1h", **kind) == 0
    assert value(after, "payments_stuck_orders_oldest_seconds", **kind) == 0
    assert value(after, "payments_stuck_orders_handed_total", **kind) == handed + 1


def test_the_oldest_review_waits_as_long_as_its_gauge_says(client, merchant):
    from datetime import timedelta

    from django.utils import timezone

    assert value(scrape(client), "payments_payout_review_oldest_seconds") == 0
    fund(merchant, 100_000_000)
    create(client, merchant, amount=PHP_THRESHOLD + 1)
    Payout.objects.update(created_at=timezone.now() - timedelta(hours=5))
    assert 5 * 3600 <= value(scrape(client), "payments_payout_review_oldest_seconds") < 5 * 3600 + 60
