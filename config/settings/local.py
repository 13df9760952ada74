"""Development: `make run`. The embedded PostgreSQL and Valkey unless DATABASE_URL / REDIS_URL are set."""

import os

from config.embedded_postgres import database_url
from config.embedded_valkey import redis_url

# No DATABASE_URL: the embedded server `make run` started (config/embedded_postgres.py). It listens on a Unix socket
# whose place it records in var/postgres/postmaster.pid, read here, so `manage.py` in a second terminal reaches the
# same database with nothing set.
if not os.environ.get("DATABASE_URL"):
    os.environ["DATABASE_URL"] = database_url()
# No REDIS_URL: the embedded Valkey `make run` started (config/embedded_valkey.py), on the port it wrote to
# var/valkey/port: the broker, the cache, the nonces and the rate limits, as production's Redis.
if not os.environ.get("REDIS_URL"):
    os.environ["REDIS_URL"] = redis_url()

# No API_ROOT: the address `make run` serves on (`make run PORT=8001` writes http://127.0.0.1:8001 to var/api_root),
# so that every link a process prints (pay_url, create_staff's admin_url) follows the port, in a second terminal
# too. Before anything was served: the default, http://127.0.0.1:8000.
API_ROOT_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "var",
                             "api_root")
if not os.environ.get("API_ROOT") and os.path.exists(API_ROOT_FILE):
    with open(API_ROOT_FILE, encoding="utf-8") as served:
        os.environ["API_ROOT"] = served.read().strip() or "http://127.0.0.1:8000"

from .base import *  # noqa: E402, F403
from .base import env  # noqa: E402

DEBUG = env.bool("DEBUG", default=True)
# Local receivers on 127.0.0.1 must work in development (docs/api.md, "Callbacks").
CALLBACK_ALLOW_PRIVATE_HOSTS = env.bool("CALLBACK_ALLOW_PRIVATE_HOSTS", default=True)
# A channel may point at a local upstream emulator in development (docs/channels.md).
CHANNEL_API_BASE_URL_OVERRIDE = env.bool("CHANNEL_API_BASE_URL_OVERRIDE", default=True)
# E-mails (a recovery link, notices) printed in the terminal of `make run`: there is no mail server in development.
EMAIL_BACKEND = env("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
