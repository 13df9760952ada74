"""Coalesced wake marks: queue a worker's task only when no queued task will look for the caller's work anyway.

A producer commits its row first, then sets one of a few marks (Redis SET NX, through the cache) and queues a task
only if one was free. When all are set, tasks are queued that have not yet looked: each releases the marks before
it looks at the database, so it sees the row this producer committed before seeing the mark. Whoever removes a mark
looks afterwards, which is all a producer that saw it set needs. A mark expires by itself, so a task lost with its
message holds the producers back this long at most (a sweeper finds their rows in any case).

Used by the callbacks' delivery (a merchant's due events, apps.callbacks.enqueue) and the payouts' submission (the
APPROVED payouts, apps.payout.services)."""

import logging

from django.core.cache import cache

logger = logging.getLogger(__name__)


def wake_mark_set(keys: list[str], *, seconds: int) -> bool:
    """Set the first free mark of `keys`; True if one was free (the caller queues a task), False if all were set
    (their tasks look for the caller's work). Raises when Redis is down: the caller decides."""
    return any(cache.add(key, 1, seconds) for key in keys)


def wake_marks_release(keys: list[str], *, what: str) -> None:
    """Release the marks (one round trip); the caller looks for work right after. Redis down: they expire."""
    try:
        cache.delete_many(keys)
    except Exception as exc:  # noqa: BLE001 - Redis down: the marks expire by themselves
        logger.warning("wake marks of %s not released (%s)", what, type(exc).__name__)
