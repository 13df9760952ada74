"""Reads that tolerate seconds of lag, from a PostgreSQL streaming replica when one is configured and healthy
(docs/architecture.md, "Where reads go").

Only the pages named there run their reads through `lag_tolerant` (or `lagging_reads` with an explicit
`.using(reads.alias)`): the operations overview, the portal's order lists and exports, stored statements of closed
days, the admin's changelists. Nothing else ever reads from the replica: `ReplicaRouter` routes a read only while
such a page has asked for it, never a write or a `select_for_update` (Django asks the router's `db_for_write` for
those), and never a read inside a transaction on the primary, which may decide money.

The replica is used only when it answers, is in recovery, and has replayed everything the primary had written when
asked, or is at most DATABASE_REPLICA_MAX_LAG seconds behind; else the reads go to the primary, with a log line and
`payments_replica_fallbacks`. The decision is kept for DATABASE_REPLICA_CHECK_INTERVAL seconds per process, so a
replica that is down costs one connect timeout per interval, not one per request.
"""

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from prometheus_client import Counter

logger = logging.getLogger(__name__)

REPLICA = "replica"  # the alias of DATABASE_REPLICA_URL (config/settings/base.py)

# Counted by the process that decided (every process's, summed, with PROMETHEUS_MULTIPROC_DIR).
REPLICA_FALLBACKS = Counter("payments_replica_fallbacks",
                            "Times lag-tolerant reads went to the primary instead of the replica, by reason.",
                            ["reason"])
LAG_TOLERANT_READS = Counter("payments_lag_tolerant_reads", "Lag-tolerant pages by the database that answered.",
                             ["database"])

# What the replica is asked: whether it is a standby, whether it has replayed up to the primary's flushed WAL
# position read just before, the time of the last transaction it replayed, and its clock.
_REPLICA_STATE = ("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn() >= %s::pg_lsn, "
                  "pg_last_xact_replay_timestamp(), clock_timestamp()")
_PRIMARY_POSITION = "SELECT pg_current_wal_flush_lsn(), clock_timestamp()"

T = TypeVar("T")

_routed: ContextVar[str | None] = ContextVar("lag_tolerant_alias", default=None)


@dataclass(frozen=True)
class ReadsFrom:
    """Where a page's lag-tolerant reads go. `as_of`: on the replica, a time up to which every commit is in what the
    page shows (the replica's replay time, or the primary's clock when it had replayed everything); None on the
    primary, whose reads are current."""

    alias: str
    as_of: datetime | None = None

    @property
    def on_replica(self) -> bool:
        return self.alias != DEFAULT_DB_ALIAS


PRIMARY = ReadsFrom(DEFAULT_DB_ALIAS)


class _Decision:
    """The last health decision of this process, and when it expires."""

    lock = threading.Lock()
    reads: ReadsFrom = PRIMARY
    until: float = 0.0


def replica_configured() -> bool:
    return REPLICA in connections.settings  # settings.DATABASES, as the connection handler read it


def replica_health_forget() -> None:
    """The next lag-tolerant page checks the replica again (after a failed read, and in tests)."""
    with _Decision.lock:
        _Decision.until = 0.0


def _fall_back(reason: str, detail: str) -> ReadsFrom:
    REPLICA_FALLBACKS.labels(reason).inc()
    logger.warning("replica skipped, lag-tolerant reads go to the primary: %s (%s)", reason, detail)
    return PRIMARY


def _check() -> ReadsFrom:
    """Ask the primary for its flushed WAL position, then the replica how far it has replayed."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(_PRIMARY_POSITION)
        position, primary_now = cursor.fetchone()
    replica = connections[REPLICA]
    try:
        with replica.cursor() as cursor:
            cursor.execute(_REPLICA_STATE, [position])
            in_recovery, caught_up, replayed_at, replica_now = cursor.fetchone()
    except DatabaseError as exc:
        replica.close()  # the next check connects again
        # The error's first line only: a connection error names host and port, never the password.
        return _fall_back("down", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    if not in_recovery:
        return _fall_back("not_in_recovery", "the replica database is not a standby")
    if caught_up:
        return ReadsFrom(REPLICA, as_of=primary_now)
    if replayed_at is None:
        return _fall_back("lagging", "no transaction replayed yet")
    lag = replica_now - replayed_at
    if lag > timedelta(seconds=settings.DATABASE_REPLICA_MAX_LAG):
        return _fall_back("lagging", f"{lag.total_seconds():.1f} s behind, limit {settings.DATABASE_REPLICA_MAX_LAG} s")
    return ReadsFrom(REPLICA, as_of=replayed_at)


def reads_from() -> ReadsFrom:
    """Where lag-tolerant reads go now: the decision of the last DATABASE_REPLICA_CHECK_INTERVAL seconds, or a new
    one (one thread of the process checks; the others wait for its answer)."""
    if not replica_configured():
        return PRIMARY
    with _Decision.lock:
        if time.monotonic() >= _Decision.until:
            _Decision.reads = _check()
            _Decision.until = time.monotonic() + settings.DATABASE_REPLICA_CHECK_INTERVAL
        return _Decision.reads


@contextmanager
def lagging_reads() -> Iterator[ReadsFrom]:
    """Within the block, reads outside a transaction go where `reads_from()` says (ReplicaRouter)."""
    reads = reads_from()
    LAG_TOLERANT_READS.labels("replica" if reads.on_replica else "primary").inc()
    token = _routed.set(reads.alias if reads.on_replica else None)
    try:
        yield reads
    finally:
        _routed.reset(token)


def lag_tolerant(read: Callable[[ReadsFrom], T]) -> T:
    """`read(reads)` on the replica when healthy; it evaluates (renders) everything it returns, so nothing reads
    after the block. If it fails there (the replica stopped or restarted, its connection cut, a query cancelled by a
    recovery conflict) it runs again on the primary, and a replica whose connection no longer works is taken as down
    for the interval."""
    with lagging_reads() as reads:
        if not reads.on_replica:
            return read(reads)
        try:
            return read(reads)
        except DatabaseError as exc:
            failure = type(exc).__name__
            down = not connections[REPLICA].is_usable()
    if down:
        connections[REPLICA].close()
        with _Decision.lock:
            _Decision.reads = _fall_back("failed_mid_read", failure)
            _Decision.until = time.monotonic() + settings.DATABASE_REPLICA_CHECK_INTERVAL
    else:
        REPLICA_FALLBACKS.labels("query_failed").inc()
        logger.warning("a lag-tolerant read failed on the replica (%s): read again on the primary", failure)
    LAG_TOLERANT_READS.labels("primary").inc()
    return read(PRIMARY)


class ReplicaRouter:
    """Routes a read to the replica only inside `lagging_reads()` and outside a transaction on the primary; every
    other decision is Django's default (DATABASE_ROUTERS in config/settings/base.py)."""

    def db_for_read(self, model, **hints):
        alias = _routed.get()
        if alias is None or connections[DEFAULT_DB_ALIAS].in_atomic_block:
            return None
        return alias

    def db_for_write(self, model, **hints):
        return DEFAULT_DB_ALIAS

    def allow_migrate(self, db, app_label, **hints):
        return db == DEFAULT_DB_ALIAS
