"""Tests: the local PostgreSQL and Redis (make test). Each variable can be overridden to isolate a run."""

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/payments")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/1")

from .base import *  # noqa: E402, F403
from .base import env  # noqa: E402

DEBUG = False
CALLBACK_ALLOW_PRIVATE_HOSTS = env.bool("CALLBACK_ALLOW_PRIVATE_HOSTS", default=True)
CHANNEL_API_BASE_URL_OVERRIDE = env.bool("CHANNEL_API_BASE_URL_OVERRIDE", default=True)  # the local emulator
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = False
SANDBOX_PAYOUT_SETTLE_SECONDS = 0.2
SANDBOX_PAYOUT_RETURN_SECONDS = 0.5
