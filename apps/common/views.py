"""Operations health check: {api_root}/healthz (contract §1, issue 3 §8)."""

import logging

from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.utils import timezone

logger = logging.getLogger(__name__)


def _check_database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure means unhealthy
        return type(exc).__name__
    return None


def _check_broker() -> str | None:
    from config.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__
    return None


def healthz(request):
    from apps.common.models import Heartbeat

    failures = {name: err for name, err in (("database", _check_database()), ("broker", _check_broker())) if err}
    sweeper = Heartbeat.objects.filter(name="callbacks.sweeper").values_list("beat_at", flat=True).first() \
        if "database" not in failures else None
    body = {
        "status": "ok" if not failures else "unavailable",
        "database": failures.get("database", "ok"),
        "broker": failures.get("broker", "ok"),
        "last_sweeper_run": sweeper.isoformat() if sweeper else None,
        "time": timezone.now().isoformat(),
        "debug": settings.DEBUG,
    }
    return JsonResponse(body, status=503 if failures else 200)
