"""Lua scripts on the cache's Redis: several commands in one round trip, through one redis-py client per process.

Django's RedisCache builds a new `redis.Redis` client (copying its ~200 response callbacks) for every cache call;
a script registered here runs on a client built once (docs/performance.md: the signed request's admission, the
callback wake marks). The cache is Redis in every configuration (apps.common.limits.check_limit_cache refuses
another at start-up).
"""

from collections.abc import Callable
from functools import lru_cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def is_redis_cache(backend: str) -> bool:
    """Whether a CACHES backend path is Django's Redis cache (or a subclass named for it)."""
    return "RedisCache" in backend


def cache_script(source: str) -> Callable:
    """The script, callable as `script(keys=[...], args=[...])` (keys through `cache.make_key`)."""
    config = settings.CACHES["default"]
    if not is_redis_cache(config["BACKEND"]):
        raise ImproperlyConfigured(f"CACHES['default'] is {config['BACKEND']}: the cache must be Redis")
    return _registered(config["LOCATION"], source)


@lru_cache(maxsize=16)
def _registered(location: str, source: str):
    return _client(location).register_script(source)


@lru_cache(maxsize=4)
def _client(location: str):
    # Imported here: redis-py (with its asyncio client) took 1.5-2 s of every process's start-up, manage.py commands
    # included (docs/performance.md "Start-up").
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    # Tried once, as a cache command (settings.REDIS_CLIENT_OPTIONS: docs/faults.md, drill 5).
    return redis.Redis.from_url(location, **settings.REDIS_CLIENT_OPTIONS, retry=Retry(NoBackoff(), 0))
