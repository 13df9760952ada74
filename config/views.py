"""Project-level views: the landing page, the operations health check, and the error pages (the JSON envelope for
the API and /currencies, HTML for everything else)."""

import logging

from django.db import connection
from django.http import JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views import defaults
from django.views.decorators.http import require_safe

from apps.common.api.exceptions import api_not_found, api_server_error
from apps.common.models import Heartbeat
from config.celery import app as celery_app

logger = logging.getLogger(__name__)

API_PREFIXES = ("/openapi/", "/currencies")


def _is_api(request) -> bool:
    return request.path_info.startswith(API_PREFIXES)  # as routed: no SCRIPT_NAME (docs/staff-access.md)


@require_safe
def home(request):
    """{api_root}/: what this is, and links to the API docs, the schema, /currencies, the portal, the admin and /healthz."""
    return render(request, "home.html")


def not_found(request, exception=None):
    return api_not_found(request) if _is_api(request) else defaults.page_not_found(request, exception)


def server_error(request):
    return api_server_error(request) if _is_api(request) else defaults.server_error(request)


# --- {api_root}/healthz (docs/api.md, "Addresses") ---------------------------------------------------------

SWEEPER_HEARTBEAT = "callbacks.sweeper"
# The sweeper beats every 5 s; a minute without a beat means beat or the workers are not running.
SWEEPER_STALE_SECONDS = 60


def _check_database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure means unhealthy
        return type(exc).__name__
    return None


def _check_broker() -> str | None:
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__
    return None


def _sweeper_last_run():
    return Heartbeat.objects.filter(name=SWEEPER_HEARTBEAT).values_list("beat_at", flat=True).first()


def healthz(request):
    """200 when the database and the broker answer, else 503 naming the failing part; also reports the last
    run of the callback sweeper (informational: a stale sweeper shows as `sweeper_stale`, not as a 503)."""
    failures = {name: err for name, err in (("database", _check_database()), ("broker", _check_broker())) if err}
    last_run = _sweeper_last_run() if "database" not in failures else None
    now = timezone.now()
    age = (now - last_run).total_seconds() if last_run else None
    body = {
        "status": "ok" if not failures else "unavailable",
        "failing": sorted(failures),
        "database": failures.get("database", "ok"),
        "broker": failures.get("broker", "ok"),
        "last_sweeper_run": last_run.isoformat() if last_run else None,
        "sweeper_age_seconds": round(age, 1) if age is not None else None,
        "sweeper_stale": age is None or age > SWEEPER_STALE_SECONDS,
        "time": now.isoformat(),
    }
    if failures:
        logger.error("healthz: %s failing", ", ".join(f"{k} ({v})" for k, v in sorted(failures.items())))
    return JsonResponse(body, status=503 if failures else 200)
