"""Production: every secret must come from the environment; private callback hosts are refused."""

import os

from django.core.exceptions import ImproperlyConfigured

# Fail closed: a process started without DJANGO_SETTINGS_MODULE gets these settings (manage.py, wsgi,
# celery), and these refuse to start rather than fall back to a development default: no embedded database or
# Valkey, no development SECRET_KEY, and no broker taken from REDIS_URL by default: production's broker is RabbitMQ
# (CELERY_BROKER_URL=amqp://..., docs/architecture.md, "The broker"), named explicitly.
_REQUIRED = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY", "PLATFORM_KEY_ENCRYPTION_KEY",
             "ALLOWED_HOSTS")
_missing = [name for name in _REQUIRED if not os.environ.get(name)]
if _missing:
    raise ImproperlyConfigured(
        f"config.settings.production needs {', '.join(_missing)} in the environment (docs/runbook.md, "
        f"'Start'). DJANGO_SETTINGS_MODULE defaults to production settings; for development set "
        f"DJANGO_SETTINGS_MODULE=config.settings.local (make run does).")

from .base import *  # noqa: E402, F403
from .base import env  # noqa: E402

DEBUG = False
SECRET_KEY = env("SECRET_KEY")
PLATFORM_KEY_ENCRYPTION_KEY = env("PLATFORM_KEY_ENCRYPTION_KEY")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS")
CALLBACK_ALLOW_PRIVATE_HOSTS = False
# A production deployment takes real money: only real upstream channels (docs/channels.md).
PLATFORM_ENVIRONMENT = env("PLATFORM_ENVIRONMENT", default="live")
if PLATFORM_ENVIRONMENT not in ("sandbox", "live"):
    raise ImproperlyConfigured(f"PLATFORM_ENVIRONMENT must be sandbox or live, not {PLATFORM_ENVIRONMENT}")

# Static files (admin, pay page CSS) served by the application server itself.
MIDDLEWARE = [MIDDLEWARE[0], "whitenoise.middleware.WhiteNoiseMiddleware", *MIDDLEWARE[1:]]  # noqa: F405

SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
SECURE_CONTENT_TYPE_NOSNIFF = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# One JSON object per log line on stderr, unless LOG_FORMAT=plain.
LOG_FORMAT = env("LOG_FORMAT", default="json")
LOGGING["handlers"]["stderr"]["formatter"] = LOG_FORMAT  # noqa: F405
