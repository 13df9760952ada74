"""One persistent Redis client per process for the hot paths' cache operations.

Django's RedisCache builds a new redis-py client object on every call (about a millisecond of CPU with redis-py
8); the signed-request admission (rate limit + nonce) and the payout submission wake-up run on every request, so
they use this client. Keys go through `cache.make_key`, so they live in the cache's own key space. With the
database cache (the embedded default) the same operations go through Django's cache.
"""

from functools import lru_cache

import redis
from django.conf import settings
from django.core.cache import cache
from redis.backoff import NoBackoff
from redis.retry import Retry


@lru_cache(maxsize=8)
def _client_for(location: str) -> redis.Redis:
    # The same connect and reply timeouts as the cache's own clients (settings.REDIS_CLIENT_OPTIONS), and no
    # retry: a command that timed out has already held the request for the whole timeout.
    return redis.Redis.from_url(location, **settings.REDIS_CLIENT_OPTIONS, retry=Retry(NoBackoff(), 0))


def redis_client() -> redis.Redis | None:
    """The client of the default cache's Redis; None when the cache is not Redis."""
    config = settings.CACHES["default"]
    if "RedisCache" not in config["BACKEND"]:
        return None
    return _client_for(config["LOCATION"])


def cache_add_flag(key: str, *, timeout: int) -> bool:
    """Set `key` if it is absent (SET NX EX); True if this call set it."""
    client = redis_client()
    if client is None:
        return cache.add(key, 1, timeout=timeout)
    return bool(client.set(cache.make_key(key), 1, nx=True, ex=timeout))
