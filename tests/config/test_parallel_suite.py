"""The suite under pytest-xdist (docs/testing.md, "Parallel"): each worker has its own Redis db, and a secret
logged in a worker still fails the run."""

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from config.settings.test import redis_url_of_this_xdist_worker


def _without_xdist(environ: dict) -> dict:
    return {k: v for k, v in environ.items() if k not in {"PYTEST_XDIST_WORKER", "XDIST_REDIS_WORKER",
                                                          "CELERY_BROKER_URL"}}


def _worker_redis_url(**environ) -> str:
    redis_url_of_this_xdist_worker(environ)
    return environ["REDIS_URL"]


def test_each_xdist_worker_takes_its_own_redis_db_and_passes_it_to_what_it_starts():
    base = "redis://127.0.0.1:6379/3"
    assert _worker_redis_url(REDIS_URL=base) == base  # no xdist: as given
    worker = "redis://127.0.0.1:6379/5"
    assert _worker_redis_url(REDIS_URL=base, PYTEST_XDIST_WORKER="gw2") == worker
    # A process the worker starts inherits its environment: the same db, not 2 further on ...
    assert _worker_redis_url(REDIS_URL=worker, PYTEST_XDIST_WORKER="gw2", XDIST_REDIS_WORKER="gw2") == worker
    # ... and one given a Redis of its own (a fault drill's private redis-server) keeps it.
    private = "redis://127.0.0.1:40001/0"
    assert _worker_redis_url(REDIS_URL=private, PYTEST_XDIST_WORKER="gw2", XDIST_REDIS_WORKER="gw2") == private
    # Past redis-server's 16 dbs: refused, with what to do, instead of silently sharing or failing later.
    with pytest.raises(ImproperlyConfigured, match="Redis db 16 .* fewer workers"):
        _worker_redis_url(REDIS_URL="redis://127.0.0.1:6379/14", PYTEST_XDIST_WORKER="gw2")
    # The settings of a worker's process: the cache (nonces, rate counters) and the Celery broker both on its db.
    env = {**_without_xdist(os.environ), "DJANGO_SETTINGS_MODULE": "config.settings.test", "REDIS_URL": base,
           "PYTEST_XDIST_WORKER": "gw2"}
    code = "from django.conf import settings; print(settings.CACHES['default']['LOCATION'], settings.CELERY_BROKER_URL)"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                            cwd=settings.BASE_DIR)
    assert result.stdout.split() == [worker, worker], result.stderr[-2000:]


@pytest.mark.skipif(not __import__("importlib").util.find_spec("xdist"), reason="needs pytest-xdist (dev group)")
def test_a_secret_logged_in_an_xdist_worker_fails_the_run_and_is_reported_redacted():
    redis_url = settings.CACHES["default"]["LOCATION"]
    env = {**_without_xdist(os.environ), "DJANGO_SETTINGS_MODULE": "config.settings.test", "LOG_LEAK_PROBE": "1",
           "REDIS_URL": redis_url}
    # --reuse-db: no database is created (the probe uses none); -n 1: a controller and one worker.
    result = subprocess.run([sys.executable, "-m", "pytest", "-n", "1", "--reuse-db", "-q", "-p", "no:cacheprovider",
                             "--durations=0", "tests/support/log_leak_probe.py"], env=env, capture_output=True,
                            text=True, timeout=180, cwd=settings.BASE_DIR)
    out = result.stdout
    assert "1 passed" in out, out[-3000:]
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    assert "1 log line(s) carry a secret" in out and "SECRET_KEY in ERROR apps.probe" in out, out[-3000:]
    assert settings.SECRET_KEY not in out + result.stderr
