"""Counters in the cache that guard money or abuse (the API's rate limit, callback re-sends, the portal's test
callbacks, the channel breaker's failure count): one way to count, exact under concurrency (docs/back-office.md,
"Limits under concurrency").

One Redis script per count (INCR, and the window's expiry when it is new), so fifteen requests at the same moment
get fifteen different values. Django's cache API cannot do it alone (`add` then `incr` are two round trips, and the
window could expire between them). The cache is Redis in every configuration; any other is refused at start-up
(check_limit_cache).
"""

from django.conf import settings
from django.core import checks
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import transaction

from apps.common.cache_scripts import cache_script, is_redis_cache
from apps.common.locks import advisory_xact_lock

_COUNT = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return n
"""


def cache_count(key: str, *, timeout: int) -> int:
    """Add one to the counter `key` (made with `timeout` seconds to live when it is new) and return its new value:
    of N callers at the same moment, each gets a different value, 1 to N."""
    return int(cache_script(_COUNT)(keys=[cache.make_key(key)], args=[timeout]))


def limit_spend(key: str, *, limit: int, timeout: int) -> bool:
    """Spend one unit of a budget of `limit` counted under `key` (a fixed window: the key names it, `timeout`
    outlives it); False when the budget is spent."""
    return cache_count(key, timeout=timeout) <= limit


@checks.register(checks.Tags.caches)
def check_limit_cache(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """The limits, wake marks and nonce rule run on Redis only: refuse to start on another cache."""
    backend = settings.CACHES["default"]["BACKEND"]
    if is_redis_cache(backend):
        return []
    return [checks.Error(f"CACHES['default'] is {backend}: the cache must be Redis (django.core.cache.backends."
                         f"redis.RedisCache); the rate limits, nonce rule and wake marks run on Redis only.",
                         hint="Set REDIS_URL (docs/development.md).", id="common.E001")]


class OneSignInAtATime:
    """For a sign-in form (Django's AuthenticationForm and its kin): one password check per username at a time,
    the lockout read after the previous attempt's failure is recorded. django-axes reads the count of failures
    before the password check and records a failure after it, so guesses sent together would all read the same
    count and all be tried (fifteen at once against a limit of five: all fifteen). Under a PostgreSQL advisory lock on
    the username, in one transaction with axes' record of the failure, the sixth guess reads five and is refused."""

    def clean(self):
        username = str(self.cleaned_data.get("username") or "").casefold()
        with transaction.atomic():
            advisory_xact_lock(f"sign-in:{username}")
            try:
                return super().clean()
            except ValidationError as exc:
                refused = exc  # committed, not rolled back: axes' record of this failure is what the next reads
        raise refused
