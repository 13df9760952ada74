"""A manage.py command in make run's second terminal starts without what it does not use (figures in
docs/performance.md, "Start-up"): no system checks (they imported the whole URLconf and every view), no redis-py
(imported by the API's authentication, for the web's first signed request), no Sentry SDK without a DSN."""

import os
import subprocess
import sys

from django.conf import settings


def test_an_operations_command_imports_neither_the_urls_nor_redis_nor_sentry(django_db_setup):
    database = settings.DATABASES["default"]
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "CELERY_BROKER_URL", "SENTRY_DSN"}}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local",
               DATABASE_URL=f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}")
    done = subprocess.run([sys.executable, "-X", "importtime", "manage.py", "platform_keys"], cwd=settings.BASE_DIR,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "django.core.management.commands.check" not in imported or "config.urls" not in imported
    for module in ("config.urls", "redis", "sentry_sdk", "apps.ledger.api.views"):
        assert module not in imported, f"{module} imported by a manage.py command"
    assert {"config.celery", "config.sentry", "django.core.management"} <= imported  # it saw the start-up
