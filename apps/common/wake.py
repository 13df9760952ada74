"""Coalesced wake marks: queue a worker's task only when no queued task will look for the caller's work anyway.

A producer commits its row first, then sets one of a few marks (Redis SET NX, through the cache) and queues a task
only if one was free. When all are set, tasks are queued that have not yet looked: each releases the marks before
it looks at the database, so it sees the row this producer committed before seeing the mark. Whoever removes a mark
looks afterwards, which is all a producer that saw it set needs. A mark expires by itself, so a task lost with its
message holds the producers back this long at most (a sweeper finds their rows in any case).

Used by the callbacks' delivery (a merchant's due events, apps.callbacks.enqueue), the payouts' submission (the
APPROVED payouts, apps.payout.services) and the refunds' (the refunds not yet submitted, apps.collection.refunds)."""

import logging

from django.core.cache import cache

from apps.common.cache_scripts import cache_script

logger = logging.getLogger(__name__)


# The first free mark set, in one round trip: under load all the marks are taken, and Django's `cache.add` per mark
# cost that many round trips on every enqueue: a third of the hosted Pay's CPU (docs/performance.md,
# "Measured changes"). The marks stay the keys `cache.add` sets and `delete_many` frees.
_FIRST_FREE = """
for _, key in ipairs(KEYS) do
  if redis.call('SET', key, '1', 'NX', 'EX', ARGV[1]) then return 1 end
end
return 0
"""


def wake_mark_set(keys: list[str], *, seconds: int) -> bool:
    """Set the first free mark of `keys`; True if one was free (the caller queues a task), False if all were set
    (their tasks look for the caller's work). Raises when Redis is down: the caller decides."""
    script = cache_script(_FIRST_FREE)
    make_key = cache.make_key  # one lookup of the cache (a thread-local), not one per key
    return script(keys=[make_key(key) for key in keys], args=[seconds]) == 1


def wake_marks_release(keys: list[str], *, what: str) -> None:
    """Release the marks (one round trip); the caller looks for work right after. Redis down: they expire."""
    try:
        cache.delete_many(keys)
    except Exception as exc:  # noqa: BLE001 - Redis down: the marks expire by themselves
        logger.warning("wake marks of %s not released (%s)", what, type(exc).__name__)
