"""Reference data (merchant keys, currencies, channels, products, bank codes) cached per process.

Staleness rule (docs/performance.md): a request reads the reference generation (one single-row SELECT) the
first time it needs cached data, and uses an entry only if it was loaded under that same generation. Every
statement that writes a reference table, whoever runs it (admin, CLI, a migration, raw SQL), bumps the
generation in its own transaction (a PostgreSQL trigger, migration common 0002). So a request sees every
reference change committed before its first lookup, exactly as it would without the cache; an entry is never
older than the request that uses it. Outside a request (Celery tasks, shell, services called directly) each
lookup reads the generation itself. On SQLite (no trigger) nothing is cached.
"""

import threading
from collections.abc import Callable, Hashable
from typing import TypeVar

from django.db import connection

T = TypeVar("T")

# Bounded: keys come only from authenticated requests' parameters or signed credentials that exist.
MAX_ENTRIES = 20_000
_PENDING = object()  # inside a request that has not read the generation yet

_local = threading.local()
_entries: dict[Hashable, tuple[int, object]] = {}


_GENERATION_SQL = "SELECT value FROM common_referencegeneration WHERE id = 1"


def _read_with(cursor) -> int | None:
    with cursor:
        cursor.execute(_GENERATION_SQL)
        row = cursor.fetchone()
    return row[0] if row else None


def _generation_read() -> int | None:
    if connection.vendor != "postgresql":
        return None
    if connection.connection is not None and connection.health_check_enabled and not connection.health_check_done \
            and not connection.in_atomic_block:
        # The request's first statement doubles as Django's connection health check (CONN_HEALTH_CHECKS), which
        # would otherwise send its own `SELECT 1` first: read on the raw connection as that check does, and on
        # any database error close the connection so the ordinary read below reconnects.
        try:
            generation = _read_with(connection.connection.cursor())
        except connection.Database.Error:
            connection.close()
        else:
            connection.health_check_done = True
            return generation
    return _read_with(connection.cursor())


def _generation() -> int | None:
    generation = getattr(_local, "generation", None)
    if generation is _PENDING:
        generation = _local.generation = _generation_read()
        return generation
    if generation is None:  # not in a request: check every time
        return _generation_read()
    return generation


def refcache_get(key: Hashable, load: Callable[[], T | None]) -> T | None:
    """The value cached under key for the current generation, else load() (cached unless None)."""
    generation = _generation()
    if generation is None:
        return load()
    hit = _entries.get(key)
    if hit is not None and hit[0] == generation:
        return hit[1]
    value = load()
    if value is not None:
        if len(_entries) >= MAX_ENTRIES:
            _entries.clear()
        _entries[key] = (generation, value)
    return value


class ReferenceScopeMiddleware:
    """One generation read per request, on the first cached lookup; none for requests that make none."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        _local.generation = _PENDING
        try:
            return self.get_response(request)
        finally:
            _local.generation = None
