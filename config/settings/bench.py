"""make bench: production settings, except that the benchmark's callback receiver on 127.0.0.1 is allowed, and the
benchmark's reference view is routed (bench/urls.py)."""

from .production import *  # noqa: F403
from .production import BROWSERLESS_PATH_PREFIXES, env

CALLBACK_ALLOW_PRIVATE_HOSTS = True
# The benchmark measures the platform itself: its orders go to the sandbox channels, not to an upstream.
PLATFORM_ENVIRONMENT = env("PLATFORM_ENVIRONMENT", default="sandbox")
SECURE_SSL_REDIRECT = False

ROOT_URLCONF = "bench.urls"
# The merchants' public key (PEM file) the reference view verifies signatures with; bench/run.py writes it.
BENCH_REFERENCE_PUBLIC_KEY = env("BENCH_REFERENCE_PUBLIC_KEY", default="")
# The reference view stands for a signed write on this stack ("the stack's ceiling"), so it is served the way the
# signed API is: without the browser middleware (config/middleware.py). Otherwise the yardstick would pay for
# sessions, CSRF, auth and messages that the API no longer runs, and every ratio to it would look better than it is.
BROWSERLESS_PATH_PREFIXES = [*BROWSERLESS_PATH_PREFIXES, "/bench/"]
