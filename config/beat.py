"""Celery beat that sends the schedule from one process only, however many beats are started (docs/deployment.md,
"Beat, exactly once").

Celery's own file scheduler, ticking only while this beat holds a lock in Redis (REDIS_URL: the cache's Redis, the
broker's too unless CELERY_BROKER_URL names another). A second beat, on another host or in a rollout's new pod, waits
as a standby and asks for the lock on every tick; it takes over within BEAT_LOCK_SECONDS of the holder's death (a
beat that stops cleanly releases the lock at once). The holder renews the lock on every tick, and the tick is never
longer than a third of the lock's life. A holder that cannot renew (Redis unreachable) sends nothing until it can;
one whose lock ran out meanwhile (another beat took over) becomes the standby. The only overlap left is a tick that
outlasts the whole lock (a broker that hangs past BEAT_LOCK_SECONDS): both beats may then send one period's tasks,
which every periodic task tolerates (they are sweeps of the database, and idempotent).

redis-py's Lock: a key set with NX and a time to live, holding a random token, renewed and released only by its
holder (a Lua script compares the token); no hand-written protocol.
"""

import logging

import redis
from celery.beat import PersistentScheduler
from django.conf import settings
from redis.exceptions import LockError, RedisError

logger = logging.getLogger(__name__)


class SingleBeatScheduler(PersistentScheduler):
    """PersistentScheduler, sending due tasks only while this beat holds the beat lock."""

    def __init__(self, *args, **kwargs):
        self._client = redis.Redis.from_url(settings.REDIS_URL, **settings.REDIS_CLIENT_OPTIONS)
        self._lock = self._client.lock(settings.BEAT_LOCK_KEY, timeout=settings.BEAT_LOCK_SECONDS)
        self._holding = False
        self._said: bool | None = None  # what the log last said, so each change is said once
        super().__init__(*args, **kwargs)

    @property
    def _longest_wait(self) -> float:
        return settings.BEAT_LOCK_SECONDS / 3

    def tick(self, *args, **kwargs) -> float:
        if not self._hold():
            return self._longest_wait
        return min(super().tick(*args, **kwargs), self._longest_wait)

    def _hold(self) -> bool:
        """Whether this beat holds the lock now: renewed if it was held, asked for if not."""
        try:
            holding = False
            if self._holding:
                try:
                    self._lock.reacquire()
                    holding = True
                except LockError:  # it ran out: another beat holds it, or no one does and it is asked for below
                    logger.warning("beat: the beat lock ran out before it was renewed")
            if not holding:
                holding = self._lock.acquire(blocking=False)
        except RedisError as exc:
            # Unknown whether the lock is still ours: send nothing this tick; a lock that outlives the outage is
            # renewed on the next one, one that ran out is asked for again.
            logger.warning("beat: cannot reach Redis for the beat lock (%s); sending nothing until it answers",
                           type(exc).__name__)
            return False
        if holding != self._said:
            logger.warning("beat: %s the beat lock %s", "holding" if holding else "standing by: another beat holds",
                           settings.BEAT_LOCK_KEY)
            self._said = holding
        self._holding = holding
        return holding

    def close(self) -> None:
        super().close()
        if self._holding:
            try:
                self._lock.release()
            except (LockError, RedisError):  # already run out, or Redis gone: it runs out by itself
                pass
            self._holding = False
