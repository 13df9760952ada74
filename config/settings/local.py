"""Development: `make run`. Embedded SQLite and filesystem broker unless DATABASE_URL / REDIS_URL are set."""

from .base import *  # noqa: F403
from .base import env

DEBUG = env.bool("DEBUG", default=True)
# Local receivers on 127.0.0.1 must work in development (contract §6).
CALLBACK_ALLOW_PRIVATE_HOSTS = env.bool("CALLBACK_ALLOW_PRIVATE_HOSTS", default=True)
