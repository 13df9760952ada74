"""Reference data (merchant keys, currencies, channels, products, bank codes) cached per process.

Staleness rule (docs/performance.md): a request reads the reference generation (one single-row SELECT) the
first time it needs cached data, and uses an entry only if it was loaded under that same generation. Every
statement that writes a reference table, whoever runs it (admin, CLI, a migration, raw SQL), bumps the
generation in its own transaction (a PostgreSQL statement trigger, created by each reference table's migration).
So a request sees every reference change committed before its first lookup, exactly as it would without the
cache. Outside a request (Celery tasks, shell, services called directly) each lookup reads the generation itself,
unless the caller opens a scope (`refcache_scope()`): one generation read for all the lookups inside it, or none when
the caller read the generation in a statement of its own (a callback attempt reads it with its claim).

The entries are per thread: model instances are mutable, and the threads of one process (gunicorn threads,
Celery's thread pool) must never share one. (A copy on every hit cost pay/create 0.17 of its 1.7 ms CPU.)
"""

import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from django.db import connection, transaction

from apps.common.connection_check import first_transaction_checks_connection
from apps.common.models import ReferenceGeneration

T = TypeVar("T")

# Bounded: keys come only from authenticated requests' parameters or signed credentials that exist.
MAX_ENTRIES = 20_000
_PENDING = object()  # inside a request that has not read the generation yet

_local = threading.local()  # .generation (inside a request) and .entries (this thread's cache)


# The generation read, a named query run through Django's cursor: the statement the ORM compiled from
# `ReferenceGeneration.objects.filter(pk=1).values_list("value", flat=True)[:1]` costs 83 us of CPU per read against
# 27 us for this one (the ORM's clone, compile and result iteration), and every signed request and each lookup outside
# a request pays it: about -55 us, 3.5 % of pay/create's app CPU (docs/performance.md, "Measured changes"). The row
# always exists (the migration inserts it). A named query that reads the generation in a statement of its own writes
# `(GENERATION_SELECT)` as a scalar subquery (the hosted Pay's lock, a callback batch's record): one text, here.
GENERATION_SELECT = "SELECT value FROM common_referencegeneration WHERE id = 1"


def _generation_select() -> int:
    with connection.cursor() as cursor:
        cursor.execute(GENERATION_SELECT)
        row = cursor.fetchone()
    if row is None:
        raise ReferenceGeneration.DoesNotExist("the reference generation row is missing")
    return row[0]


# A request's first statement on a kept connection (CONN_MAX_AGE) is preceded by Django's health check
# (CONN_HEALTH_CHECKS: a `SELECT 1` round trip); when the generation read is that first statement, the read is the
# check (apps.common.connection_check; docs/faults.md, drill 3): one round trip fewer per signed request
# (docs/performance.md, "Measured changes").
_generation_read = first_transaction_checks_connection(_generation_select)


def _generation() -> int:
    generation = getattr(_local, "generation", None)
    if generation is None:  # not in a request: check every time
        return _generation_read()
    if generation is _PENDING:
        generation = _local.generation = _generation_read()
    return generation


@contextmanager
def refcache_scope(*, generation: int | None = None) -> Iterator[None]:
    """The lookups inside see the reference data of one generation: `generation`, read by the caller in a statement
    that ran before them (see the staleness rule), else one read on the first lookup. Inside a request or an
    enclosing scope, that one's generation is kept, except in a request that has made no lookup yet: `generation` is
    then the request's one read, for the rest of it (the hosted Pay reads it with the order's lock). For a short unit
    of work (one callback attempt): a change committed after the generation was read is seen by the next scope, not by
    this one."""
    current = getattr(_local, "generation", None)
    if current is _PENDING and generation is not None:
        _local.generation = generation
    if current is not None:
        yield
        return
    _local.generation = _PENDING if generation is None else generation
    try:
        yield
    finally:
        _local.generation = None


def generation_subquery():
    """The generation as a scalar subquery, for a caller that reads it in one of its own statements (then
    `refcache_scope(generation=...)`)."""
    from django.db.models import Subquery

    return Subquery(ReferenceGeneration.objects.filter(pk=1).values("value")[:1])


def refcache_get(key: Hashable, load: Callable[[], T | None]) -> T | None:
    """The value this thread cached under key for the current generation, else load() (cached unless None)."""
    generation = _generation()
    entries = _entries()
    hit = entries.get(key)
    if hit is not None and hit[0] == generation:
        return hit[1]
    value = load()
    if value is not None:
        if _written_by_this_transaction(generation):
            return value  # may be this transaction's own uncommitted row: never cached
        if len(entries) >= MAX_ENTRIES:
            entries.clear()
        entries[key] = (generation, value)
    return value


def _written_by_this_transaction(generation: int) -> bool:
    """Inside a request the generation is the one read at its first lookup. If the request's own open transaction
    has since written reference data (a platform account created by its first posting, a merchant created in the
    admin), the row just loaded may be one that transaction rolls back, and the generation it would be cached
    under stays current then: such a value is not cached. One more single-row read, on a miss inside a transaction
    only. (Outside a request each lookup reads the generation the transaction itself bumped: a value that a
    rollback discards was cached under a generation the sequence never hands out again.)"""
    if getattr(_local, "generation", None) is None or not transaction.get_connection().in_atomic_block:
        return False
    return _generation_read() != generation


def _entries() -> dict[Hashable, tuple[int, object]]:
    entries = getattr(_local, "entries", None)
    if entries is None:
        entries = _local.entries = {}
    return entries


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


# --- the database side: the generation row and the triggers that bump it --------------------------------------
# A sequence never hands out a value twice, even across rolled-back transactions, so a generation a process has seen
# can never come back with other data behind it. TRUNCATE is covered too (test flushes).

GENERATION_FUNCTION_SQL = """
CREATE SEQUENCE common_reference_generation_seq;
CREATE FUNCTION common_reference_generation_bump() RETURNS trigger AS $$
BEGIN
    INSERT INTO common_referencegeneration (id, value) VALUES (1, nextval('common_reference_generation_seq'))
        ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
INSERT INTO common_referencegeneration (id, value) VALUES (1, nextval('common_reference_generation_seq'));
"""
GENERATION_FUNCTION_DROP_SQL = """
DROP FUNCTION common_reference_generation_bump();
DROP SEQUENCE common_reference_generation_seq;
"""


def reference_table_trigger(table: str):
    """The migration operation that makes every write to `table` bump the generation, in the writer's transaction.
    Each app that owns reference data adds one per table to its own migration."""
    from django.db import migrations

    return migrations.RunSQL(
        f"CREATE TRIGGER {table}_reference_generation AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table}"
        f" FOR EACH STATEMENT EXECUTE FUNCTION common_reference_generation_bump();",
        f"DROP TRIGGER {table}_reference_generation ON {table};")
