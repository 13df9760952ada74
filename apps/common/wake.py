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


class Drain:
    """Rows committed for a worker to hand on (APPROVED payouts, refunds not yet submitted), woken by one mark.

    After a producer's commit, `wake()` queues the drain's task only when the mark was free. The task calls
    `run(take, hand_on)`: the mark is released first (a producer that saw it set committed before that, so this drain
    finds its row), then rows are taken one at a time (`take()` commits its claim under SKIP LOCKED and returns the
    row, None when there is none) and handed on. The first row taken queues the next drain, so a burst committed
    before any drain started is spread over the worker's threads; the drain that finds nothing ends the chain, and
    one that took `limit` rows queues the next behind other tasks (the channels' HTTP calls are serial). A row whose
    hand-on raises is logged and left to its sweeper, as is everything when Redis or the broker is down. The mark
    expires after `seconds`: a drain lost with its message holds the next rows back this long at most. Measured
    against one message per row: docs/performance.md, "Measured changes"."""

    def __init__(self, *, what: str, key: str, task: str, seconds: int = 10, limit: int = 200):
        self.what, self.keys, self.task, self.seconds, self.limit = what, [key], task, seconds, limit

    def wake(self) -> None:
        try:
            free = wake_mark_set(self.keys, seconds=self.seconds)
        except Exception as exc:  # noqa: BLE001 - Redis down: the sweeper finds the rows
            logger.warning("%s not queued (%s); the sweeper will", self.what, type(exc).__name__)
            return
        if free:
            self.queue_next()

    def queue_next(self) -> None:
        from django.utils.module_loading import import_string  # the tasks import the domain modules that build drains

        try:
            import_string(self.task).delay()
        except Exception as exc:  # noqa: BLE001 - broker down: the sweeper finds the rows
            logger.warning("%s drain not queued (%s); the sweeper will", self.what, type(exc).__name__)

    def run(self, take, hand_on) -> int:
        """Release the mark, then take and hand on up to `limit` rows; returns how many were taken."""
        wake_marks_release(self.keys, what=self.what)
        taken = 0
        while taken < self.limit:
            row = take()
            if row is None:
                return taken
            if not taken:
                self.queue_next()
            taken += 1
            try:
                hand_on(row)
            except Exception:  # taken and committed: the sweeper hands it on again
                logger.exception("%s: %s not handed on; the sweeper will", self.what, row)
        self.queue_next()
        return taken
