"""The hottest write paths' database helpers: one INSERT built once per model, and statements batched into one
round trip.

`Batch`: on PostgreSQL the statements added to it are sent as one multi-statement query when it runs: one round
trip instead of one each. PostgreSQL runs them in order, each with its own snapshot (READ COMMITTED), so a
statement sees what the statements before it did and waited for (a row lock taken by the first is held when the
second reads). On other databases (SQLite, the embedded default) each statement runs when it is added. Either way
a statement's rows are handed to its callback once it has run; an error aborts the caller's transaction as usual.

Each batched statement is a prepared statement of the connection's session, sent as `EXECUTE name(arguments)`
with its arguments rendered client-side: PostgreSQL parses and plans it once per connection instead of on every
request (parsing and planning were ~40 % of the PostgreSQL CPU of a payout create; docs/performance.md). The
first batch on a connection that uses a statement prepares it in the same round trip, with a `DO` block that
prepares it only if the session has not got it (a PREPARE survives the rollback of its transaction, so after a
failed batch this process cannot know which ran). Session-level prepared statements need a session per
connection: behind PgBouncer, session pooling, not transaction pooling. With server-side binding
(`OPTIONS["server_side_binding"]`) psycopg manages prepared statements of its own, and batches send their
statements as they are.


`Model.save()` rebuilds and recompiles the INSERT on every call, which on pay/create and payout/create cost more
CPU than the rest of the request's database work. This does what Django's insert compiler does (each field's
`pre_save(add=True)` then `get_db_prep_save`), so defaults, auto_now_add and JSON adapt the same way, and sends
pre_save/post_save (created=True) as save() does when anything listens. Not for models with parents
(multi-table inheritance).
"""

import hashlib
import re
import weakref
from collections.abc import Callable
from functools import lru_cache

from django.db import IntegrityError, connections, transaction
from django.db.models import Model, signals
from psycopg.pq import ExecStatus


@lru_cache(maxsize=32)
def _insert_sql(model: type[Model], alias: str, with_pk: bool) -> tuple[str, tuple, bool]:
    connection = connections[alias]
    meta = model._meta
    fields = tuple(field for field in meta.local_concrete_fields if with_pk or field is not meta.auto_field)
    quote = connection.ops.quote_name
    # A row given its key needs nothing back (one result set fewer to read on the batched path).
    returning = connection.features.can_return_columns_from_insert and not with_pk
    sql = (f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(field.column) for field in fields)}) "
           f"VALUES ({', '.join(['%s'] * len(fields))})"
           + (f" RETURNING {quote(meta.pk.column)}" if returning else ""))
    return sql, fields, returning


Rows = list[tuple]

_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%s|%%")
PREPARED_PER_CONNECTION = 256  # past this a statement is sent as it is (the batched statements are a fixed few)


class _Session:
    """What batches know of one psycopg connection's session: the statements prepared there, and a client-side
    binding cursor that renders statements (it never executes). A connection is used by one thread at a time."""

    def __init__(self, raw) -> None:
        from psycopg import ClientCursor
        from psycopg.adapt import Transformer

        self.renderer = ClientCursor(raw)
        # An EXECUTE's arguments are literals quoted by psycopg's own adapters for this connection (what mogrify
        # does, without parsing a query for each statement).
        self.literal = Transformer(raw).as_literal
        self.encoding = raw.info.encoding
        self.prepared: set[str] = set()
        # psycopg prepares statements of its own only with server-side binding (Django's OPTIONS
        # server_side_binding), and then sends DEALLOCATE ALL after a rollback, which would drop these too.
        self.prepares = raw.prepare_threshold is None


# By psycopg connection: a new connection (after a close or a failed health check) starts a new session.
_SESSIONS: "weakref.WeakKeyDictionary[object, _Session]" = weakref.WeakKeyDictionary()


@lru_cache(maxsize=PREPARED_PER_CONNECTION)
def _prepared_form(sql: str) -> tuple[str, str, tuple]:
    """A statement with psycopg placeholders (%s or %(name)s) as (name, PREPARE body with $n, the order of the
    arguments: positions or names)."""
    order: list = []
    numbers: dict[str, int] = {}

    def number(match: re.Match) -> str:
        if match.group(0) == "%%":
            return "%"
        if match.group(1) is None:
            order.append(len(order))
            return f"${len(order)}"
        if match.group(1) not in numbers:
            order.append(match.group(1))
            numbers[match.group(1)] = len(order)
        return f"${numbers[match.group(1)]}"

    body = _PLACEHOLDER.sub(number, sql)
    name = "batch_" + hashlib.sha1(sql.encode()).hexdigest()[:24]
    return name, body, tuple(order)


class Batch:
    """Statements for one round trip (PostgreSQL) or run as added (elsewhere); see the module docstring."""

    def __init__(self) -> None:
        self.connection = transaction.get_connection()
        self.deferred = self.connection.vendor == "postgresql"
        self._pending: list[tuple[str, Callable[[Rows], None] | None]] = []
        self._locking: list[tuple[str, Callable[[Rows], None] | None]] = []  # sent after _pending
        self._session: _Session | None = None
        self._preparing: dict[str, str] = {}  # name -> the DO block that prepares it, sent first
        self._refusals: list[Callable[[IntegrityError], Exception | None]] = []

    def refuse(self, translate: Callable[[IntegrityError], Exception | None]) -> None:
        """Raise what `translate` makes of an IntegrityError of this batch (a constraint that stands for a business
        refusal), unless it returns None. Which statement failed is not known, only the constraint."""
        self._refusals.append(translate)

    def add(self, sql: str, params, then: Callable[[Rows], None] | None = None, *, locking: bool = False) -> None:
        """`locking`: the statement takes (or needs) row locks that other transactions queue on, such as a
        merchant's balance rows. On PostgreSQL the locking statements run after all the others of the batch, in the
        order they were added, so that those locks are held for as short a time as possible (only while they run
        and COMMIT, with `run(commit=True)`). So nothing added to the batch without `locking` may depend on them."""
        if self.deferred:
            if self._session is None:
                self.connection.ensure_connection()
                raw = self.connection.connection
                self._session = _SESSIONS.get(raw) or _SESSIONS.setdefault(raw, _Session(raw))
            (self._locking if locking else self._pending).append((self._render(sql, params), then))
            return
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall() if cursor.description else []
        if then is not None:
            then(rows)

    def _render(self, sql: str, params) -> str:
        """`EXECUTE name(arguments)` of the statement prepared in this session (preparing it first, in this batch,
        if this process has not seen it run there); the statement itself once the session holds too many."""
        name, body, order = _prepared_form(sql)
        session = self._session
        if name not in session.prepared:
            if not session.prepares or len(session.prepared) >= PREPARED_PER_CONNECTION:
                return session.renderer.mogrify(sql, params)
            if name not in self._preparing:
                self._preparing[name] = session.renderer.mogrify(
                    "DO $prepare$ BEGIN IF NOT EXISTS (SELECT FROM pg_prepared_statements WHERE name = %s) THEN "
                    "EXECUTE %s; END IF; END $prepare$", [name, f"PREPARE {name} AS {body}"])
        if not order:
            return f"EXECUTE {name}"
        literal, encoding = session.literal, session.encoding
        arguments = (params[key] for key in order) if isinstance(params, dict) else params
        return f"EXECUTE {name}({', '.join(literal(argument).decode(encoding) for argument in arguments)})"

    def run(self, *, commit: bool = False) -> None:
        """Send the batch. `commit`: this is the last batch of the caller's transaction. When that transaction is
        the outermost atomic block (no savepoint, not marked for rollback), its COMMIT travels with this batch
        instead of in a round trip of its own, and Django's COMMIT at the block's end finds no transaction open and
        sends nothing. Elsewhere (a nested block, SQLite) it changes nothing."""
        preparing, self._preparing = self._preparing, {}
        pending = [(sql, None) for sql in preparing.values()] + self._pending + self._locking
        self._pending, self._locking = [], []
        if pending and commit and self._outermost_transaction():
            pending.append(("COMMIT", None))
        if not pending:
            return
        with self.connection.cursor() as cursor:
            try:
                cursor.execute(";\n".join(sql for sql, _ in pending))  # no parameters: each one is rendered
            except IntegrityError as exc:
                for translate in self._refusals:
                    if (refusal := translate(exc)) is not None:
                        raise refusal from exc
                raise
            self._session.prepared.update(preparing)  # only now: a failed batch may have stopped before them
            results = cursor.cursor  # the rows are read from psycopg's cursor, with one error wrapper for all
            with self.connection.wrap_database_errors:
                for index, (_, then) in enumerate(pending):
                    if index:
                        results.nextset()
                    if then is not None:
                        then(results.fetchall() if results.pgresult.status == ExecStatus.TUPLES_OK else [])

    def _outermost_transaction(self) -> bool:
        connection = self.connection
        return (connection.in_atomic_block and len(connection.atomic_blocks) == 1 and not connection.savepoint_ids
                and not connection.needs_rollback)


def ids_reserve(batch: Batch, *models: type[Model]) -> list[int | None]:
    """Primary keys for rows not written yet, one per model, taken from their sequences in `batch` (PostgreSQL),
    so rows naming each other can be written in any order in one round trip (foreign keys are checked at
    COMMIT). Filled when the batch runs; elsewhere all None (rows get their keys as they are written)."""
    ids: list[int | None] = [None] * len(models)
    if batch.deferred:
        def take(rows: Rows) -> None:
            ids[:] = rows[0]

        batch.add(f"SELECT {', '.join(['nextval(pg_get_serial_sequence(%s, %s))'] * len(models))}",
                  [value for model in models for value in (model._meta.db_table, model._meta.pk.column)], take)
    return ids


def model_insert(instance: Model, batch: Batch | None = None) -> Model:
    """INSERT `instance` (not saved before) and set its primary key (or insert the one it was given); returns it.

    With `batch`, the INSERT joins it: the instance has its key (and post_save is sent) once the batch ran."""
    connection = transaction.get_connection()
    model = type(instance)
    sql, fields, returning = _insert_sql(model, connection.alias, instance.pk is not None)
    if signals.pre_save.has_listeners(model):
        signals.pre_save.send(sender=model, instance=instance, raw=False, using=connection.alias, update_fields=None)
    params = [field.get_db_prep_save(field.pre_save(instance, True), connection=connection) for field in fields]

    def inserted(rows: Rows) -> None:
        instance.pk = rows[0][0]
        instance._state.adding = False
        instance._state.db = connection.alias
        if signals.post_save.has_listeners(model):
            signals.post_save.send(sender=model, instance=instance, created=True, update_fields=None, raw=False,
                                   using=connection.alias)

    given = instance.pk
    if batch is not None and (returning or given is not None):
        batch.add(sql, params, inserted if returning else lambda rows: inserted([(given,)]))
        return instance
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        pk = cursor.fetchone()[0] if returning else (given if given is not None else cursor.lastrowid)
    inserted([(pk,)])
    return instance
