"""The cache's Redis backend, with one redis-py client per connection pool instead of one per call."""

from django.core.cache.backends import redis


class RedisCacheClient(redis.RedisCacheClient):
    """Django builds a new `redis.Redis` client (copying its ~200 response callbacks) for every cache call, as kombu
    did for every publish (config/broker.py); one client per connection pool does the same for a fraction of the
    CPU (docs/performance.md, "Measured changes"). redis-py clients are thread-safe, each command takes a connection
    from the pool; Django keeps one cache object per thread in any case."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))  # a pool, once made, is kept for the life of this object
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class RedisCache(redis.RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = RedisCacheClient
