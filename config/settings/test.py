"""Tests: the local PostgreSQL and Redis (make test). Each variable can be overridden to isolate a run."""

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/payments")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/1")


def redis_url_of_this_xdist_worker(environ) -> None:
    """Under pytest-xdist (make test runs several workers, docs/testing.md) worker gwN takes the Redis db REDIS_URL
    names plus N: every test clears its cache (FLUSHDB) and purges its Celery queue, which must not reach another
    worker's nonces, rate counters or tasks. Written to the environment, so the processes a test starts with it
    (gunicorn, Celery, manage.py) use the same db; XDIST_REDIS_WORKER marks it done, so that a child loading these
    settings again, or a process given a REDIS_URL of its own (a fault drill's private redis-server), is left as is.
    The databases are per worker already: pytest-django names them test_<name>_gwN."""
    worker = environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or environ.get("XDIST_REDIS_WORKER") == worker:
        return
    from urllib.parse import urlsplit, urlunsplit

    from django.core.exceptions import ImproperlyConfigured

    url = urlsplit(environ["REDIS_URL"])
    index = int(url.path.strip("/") or 0) + int(worker[2:])
    if index > 15:  # redis-server's default `databases 16`
        raise ImproperlyConfigured(f"xdist worker {worker} would use Redis db {index} of {url.netloc}: give REDIS_URL "
                                   "a lower db, or run fewer workers (-n)")
    environ["REDIS_URL"] = urlunsplit(url._replace(path=f"/{index}"))
    environ["XDIST_REDIS_WORKER"] = worker


redis_url_of_this_xdist_worker(os.environ)

from .base import *  # noqa: E402, F403
from .base import env  # noqa: E402

DEBUG = False
CALLBACK_ALLOW_PRIVATE_HOSTS = env.bool("CALLBACK_ALLOW_PRIVATE_HOSTS", default=True)
CHANNEL_API_BASE_URL_OVERRIDE = env.bool("CHANNEL_API_BASE_URL_OVERRIDE", default=True)  # the local emulator
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = False
SANDBOX_REFUND_SETTLE_SECONDS = 0.2
SANDBOX_PAYOUT_SETTLE_SECONDS = env.float("SANDBOX_PAYOUT_SETTLE_SECONDS", default=0.2)  # a drill may hold one longer
SANDBOX_PAYOUT_RETURN_SECONDS = 0.5
# E-mails stay in memory (django.core.mail.outbox), in processes a test starts as well.
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
# The suite's months of callback attempts go back to 2024 (tests travel in time: tests/conftest.py); none is past
# retention. The retention's own tests set theirs.
CALLBACK_ATTEMPT_RETENTION_MONTHS = 120
