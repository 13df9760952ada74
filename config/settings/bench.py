"""make bench: production settings, except that the benchmark's callback receiver on 127.0.0.1 is allowed."""

from .production import *  # noqa: F403

CALLBACK_ALLOW_PRIVATE_HOSTS = True
SECURE_SSL_REDIRECT = False
