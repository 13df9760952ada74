"""The cache's Redis backend (config/cache.py): one redis-py client per connection pool, not one per call."""

import pytest
from django.core.cache import cache, caches


@pytest.mark.skipif(type(caches["default"]).__name__ != "RedisCache", reason="the cache is not Redis")
def test_the_cache_reuses_one_redis_client_and_still_works():
    assert caches["default"]._cache.get_client(write=True) is caches["default"]._cache.get_client(write=True)
    assert cache.add("config-cache-test", 1, 5) is True
    assert cache.add("config-cache-test", 2, 5) is False  # SET NX through the kept client
    assert cache.get("config-cache-test") == 1
    cache.delete("config-cache-test")
