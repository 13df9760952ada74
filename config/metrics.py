"""Prometheus metrics at /metrics (docs/runbook.md, "Metrics and alerts").

Request latency is a histogram by route template (never the raw path, which holds order numbers), method and status.
Business gauges (orders by status, due and dead callbacks, the review queue, settlement pending) are read from
PostgreSQL at scrape time, one GROUP BY query each, so they are right whichever process answers the scrape. The
endpoint answers only clients in METRICS_ALLOWED_NETWORKS or bearing METRICS_TOKEN; anyone else gets a 404.
"""

import hmac
import ipaddress
import os
import re
import time

from django.conf import settings
from django.db.models import Count, Min
from django.http import Http404, HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

REQUEST_SECONDS = Histogram("payments_http_request_duration_seconds", "Request latency by route, method and status.",
                            ["route", "method", "status"])
_NAMED_GROUP = re.compile(r"\(\?P<(\w+)>[^)]*\)")


def route_of(request) -> str:
    """The URL pattern that answered (`openapi/v1/payout/create`, `pay/<str:platform_order_no>`), not the path."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return "unmatched"
    route = match.route or match.view_name or "unmatched"
    # A regex pattern (re_path) reads like a path() one: `pay/(?P<pay_token>.*)$` -> `pay/<pay_token>`, the API's
    # catch-all `openapi/v1/.*$` -> `openapi/v1/*`.
    route = _NAMED_GROUP.sub(r"<\1>", route).replace("^", "").replace("$", "")
    return route.replace(".*", "*")


class RequestMetrics:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        REQUEST_SECONDS.labels(route_of(request), request.method, str(response.status_code)).observe(
            time.perf_counter() - started)
        return response


class DatabaseCollector:
    """Gauges read at scrape time (one GROUP BY query each)."""

    def collect(self):
        from apps.callbacks.selectors import callbacks_due_and_dead
        from apps.collection.models import CollectionOrder
        from apps.collection.selectors import settlement_pending_by_currency
        from apps.payout.models import Payout

        collection = GaugeMetricFamily("payments_collection_orders", "Collection orders by status.", labels=["status"])
        for row in CollectionOrder.objects.order_by().values("status").annotate(n=Count("pk")):
            collection.add_metric([row["status"]], row["n"])
        yield collection

        payouts = GaugeMetricFamily("payments_payout_orders", "Payout orders by status.", labels=["status"])
        frozen = 0
        for row in Payout.objects.order_by().values("status").annotate(n=Count("pk")):
            payouts.add_metric([row["status"]], row["n"])
            frozen += row["n"] if row["status"] == Payout.Status.FROZEN else 0
        yield payouts
        yield GaugeMetricFamily("payments_payout_review_queue", "FROZEN payouts waiting for a reviewer.", value=frozen)
        # Waiting for a reviewer is not stuck (nothing died), but a long wait is a person's case: its age is a gauge.
        waiting_since = Payout.objects.filter(status=Payout.Status.FROZEN).aggregate(oldest=Min("created_at"))["oldest"]
        yield GaugeMetricFamily("payments_payout_review_oldest_seconds", "Age of the oldest payout waiting for a "
                                "reviewer (0: none).",
                                value=(timezone.now() - waiting_since).total_seconds() if waiting_since else 0)

        due, dead = callbacks_due_and_dead(now=timezone.now())
        yield GaugeMetricFamily("payments_callbacks_due", "Pending callback events whose next attempt is due.",
                                value=due)
        yield GaugeMetricFamily("payments_callbacks_dead", "Callback events given up on (dead).", value=dead)

        count = GaugeMetricFamily("payments_settlement_pending_orders",
                                  "Successful D1 collection orders not yet released, per currency.",
                                  labels=["currency"])
        amount = GaugeMetricFamily("payments_settlement_pending_amount",
                                   "Their amount in minor units, per currency.", labels=["currency"])
        for currency, pending in settlement_pending_by_currency().items():
            count.add_metric([currency], pending["count"])
            amount.add_metric([currency], pending["amount"])
        yield count
        yield amount

        yield from stuck_order_gauges()


def stuck_order_gauges():
    """Orders whose next step died (apps/operations/selectors.py, stranded_orders), by kind and age bucket, and the
    oldest one's age per kind: the figures of the overview's "Stuck orders" tile. Alert on any kind older than 5
    minutes (a sweep that cannot finish it) and on any `critical` kind at all."""
    from apps.common.stranded import AGE_BUCKETS
    from apps.operations.selectors import stranded_orders

    now = timezone.now()
    stuck = GaugeMetricFamily("payments_stuck_orders", "Orders whose next step died, by kind and age.",
                              labels=["kind", "age", "critical"])
    oldest = GaugeMetricFamily("payments_stuck_orders_oldest_seconds", "Age of the oldest stuck order, by kind "
                               "(0: none).", labels=["kind"])
    for figure in stranded_orders(now=now):
        critical = "true" if figure.kind.critical else "false"
        for bucket, _ in AGE_BUCKETS:
            stuck.add_metric([figure.kind.name, bucket, critical], figure.ages[bucket])
        oldest.add_metric([figure.kind.name], (now - figure.oldest).total_seconds() if figure.oldest else 0)
    yield stuck
    yield oldest


_database_registry = CollectorRegistry(auto_describe=False)
_database_registry.register(DatabaseCollector())


def _process_registry():
    """This process's counters, or every process's when PROMETHEUS_MULTIPROC_DIR is set (gunicorn workers, Celery
    workers each write their own files there)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return registry
    return REGISTRY


_FORWARDED_FOR = re.compile(r'for="?\[?([^\]";,]+)', re.IGNORECASE)


def _addresses(request) -> list[str]:
    """Every address the request names: the peer (REMOTE_ADDR) and, for a request a proxy forwarded, the ones in
    X-Forwarded-For, X-Real-IP and Forwarded (RFC 7239 `for=`)."""
    addresses = [request.META.get("REMOTE_ADDR", "")]
    addresses += [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    addresses += [request.META["HTTP_X_REAL_IP"].strip()] if request.META.get("HTTP_X_REAL_IP") else []
    addresses += _FORWARDED_FOR.findall(request.META.get("HTTP_FORWARDED", ""))
    return addresses


def _in_allowed_networks(address: str) -> bool:
    try:
        client = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(client in ipaddress.ip_network(network, strict=False) for network in settings.METRICS_ALLOWED_NETWORKS)


def allowed(request) -> bool:
    """The token, or every address the request names in METRICS_ALLOWED_NETWORKS. Every one, not just the peer: a
    reverse proxy on the same host (nginx on 127.0.0.1) makes the peer a loopback address for any client of the
    internet, and the forwarding headers name that client; a header a direct client forges only shuts itself out."""
    token = settings.METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer ") and hmac.compare_digest(header[7:].encode(), token.encode()):
        return True
    return all(_in_allowed_networks(address) for address in _addresses(request))


def metrics(request):
    """GET /metrics in Prometheus' text format; a 404 for anyone not allowed (its existence is not revealed)."""
    if request.method != "GET" or not allowed(request):
        raise Http404
    body = generate_latest(_process_registry()) + generate_latest(_database_registry)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
