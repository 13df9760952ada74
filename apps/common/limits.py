"""Counters in the cache that guard money or abuse (the API's rate limit, callback re-sends, the portal's test
callbacks, the channel breaker's failure count): one way to count, exact under concurrency on every cache the
settings allow (docs/back-office.md, "Limits under concurrency").

Django's cache API cannot do it alone: `incr` is a read and a write on the database cache, so fifteen requests at
the same moment all read 0 and all pass a limit of ten. Here, on Redis one script (INCR, and the window's expiry
when it is new); on the database cache the same two steps under a PostgreSQL advisory lock on the counter's key, so
that the second request reads what the first wrote. Any other cache is refused at start-up (check_limit_cache).
"""

from django.conf import settings
from django.core import checks
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import connection, transaction

from apps.common.cache_scripts import cache_script

DATABASE_CACHE = "django.core.cache.backends.db.DatabaseCache"

_COUNT = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return n
"""


def cache_count(key: str, *, timeout: int) -> int:
    """Add one to the counter `key` (made with `timeout` seconds to live when it is new) and return its new value:
    of N callers at the same moment, each gets a different value, 1 to N."""
    script = cache_script(_COUNT)
    if script is not None:
        return int(script(keys=[cache.make_key(key)], args=[timeout]))
    if settings.CACHES["default"]["BACKEND"] != DATABASE_CACHE:
        raise ImproperlyConfigured(f"{settings.CACHES['default']['BACKEND']} cannot count limits exactly; the "
                                   f"cache must be Redis or the database cache")
    # The database cache's rows are written through this connection: in this transaction, behind the lock (held to
    # its end, the outer transaction's when there is one). hashtextextended: the key's 64-bit lock number; two keys
    # on one number only wait for each other.
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"cache-count:{key}"])
        cache.add(key, 0, timeout=timeout)
        return cache.incr(key)


def limit_spend(key: str, *, limit: int, timeout: int) -> bool:
    """Spend one unit of a budget of `limit` counted under `key` (a fixed window: the key names it, `timeout`
    outlives it); False when the budget is spent."""
    return cache_count(key, timeout=timeout) <= limit


@checks.register(checks.Tags.caches)
def check_limit_cache(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """The limits count only on Redis or the database cache: refuse to start on another."""
    backend = settings.CACHES["default"]["BACKEND"]
    if "RedisCache" in backend or backend == DATABASE_CACHE:
        return []
    return [checks.Error(f"CACHES['default'] is {backend}: the rate limits count exactly only on Redis or the "
                         f"database cache (apps.common.limits).", id="common.E001")]


class OneSignInAtATime:
    """For a sign-in form (Django's AuthenticationForm and its kin): one password check per username at a time,
    the lockout read after the previous attempt's failure is recorded. django-axes reads the count of failures
    before the password check and records a failure after it, so guesses sent together would all read the same
    count and all be tried (fifteen at once against a limit of five: all fifteen). Under a PostgreSQL advisory lock on
    the username, in one transaction with axes' record of the failure, the sixth guess reads five and is refused."""

    def clean(self):
        username = str(self.cleaned_data.get("username") or "").casefold()
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"sign-in:{username}"])
            try:
                return super().clean()
            except ValidationError as exc:
                refused = exc  # committed, not rolled back: axes' record of this failure is what the next reads
        raise refused
