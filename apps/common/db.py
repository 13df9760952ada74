"""The hottest write paths' database helpers: one INSERT built once per model, and statements batched into one
round trip.

`Batch`: on PostgreSQL the statements added to it are rendered with their parameters (client-side binding, as
Django's backend does by default) and sent as one multi-statement query when it runs: one round trip instead of
one each. PostgreSQL runs them in order, each with its own snapshot (READ COMMITTED), so a statement sees what
the statements before it did and waited for (a row lock taken by the first is held when the second reads). On
other databases (SQLite, the embedded default) each statement runs when it is added. Either way a statement's
rows are handed to its callback once it has run; an error aborts the caller's transaction as usual.


`Model.save()` rebuilds and recompiles the INSERT on every call, which on pay/create and payout/create cost more
CPU than the rest of the request's database work. This does what Django's insert compiler does (each field's
`pre_save(add=True)` then `get_db_prep_save`), so defaults, auto_now_add and JSON adapt the same way, and sends
pre_save/post_save (created=True) as save() does when anything listens. Not for models with parents
(multi-table inheritance).
"""

from collections.abc import Callable
from functools import lru_cache

from django.db import IntegrityError, connections, transaction
from django.db.models import Model, signals


@lru_cache(maxsize=32)
def _insert_sql(model: type[Model], alias: str, with_pk: bool) -> tuple[str, tuple, bool]:
    connection = connections[alias]
    meta = model._meta
    fields = tuple(field for field in meta.local_concrete_fields if with_pk or field is not meta.auto_field)
    quote = connection.ops.quote_name
    returning = connection.features.can_return_columns_from_insert
    sql = (f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(field.column) for field in fields)}) "
           f"VALUES ({', '.join(['%s'] * len(fields))})"
           + (f" RETURNING {quote(meta.pk.column)}" if returning else ""))
    return sql, fields, returning


Rows = list[tuple]


class Batch:
    """Statements for one round trip (PostgreSQL) or run as added (elsewhere); see the module docstring."""

    def __init__(self) -> None:
        self.connection = transaction.get_connection()
        self.deferred = self.connection.vendor == "postgresql"
        self._pending: list[tuple[str, Callable[[Rows], None] | None]] = []
        self._renderer = None  # a client-side-binding cursor of the connection, for rendering statements
        self._refusals: list[Callable[[IntegrityError], Exception | None]] = []

    def refuse(self, translate: Callable[[IntegrityError], Exception | None]) -> None:
        """Raise what `translate` makes of an IntegrityError of this batch (a constraint that stands for a business
        refusal), unless it returns None. Which statement failed is not known, only the constraint."""
        self._refusals.append(translate)

    def add(self, sql: str, params, then: Callable[[Rows], None] | None = None) -> None:
        if self.deferred:
            if self._renderer is None:
                from psycopg import ClientCursor

                self.connection.ensure_connection()
                self._renderer = ClientCursor(self.connection.connection)
            self._pending.append((self._renderer.mogrify(sql, params), then))
            return
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall() if cursor.description else []
        if then is not None:
            then(rows)

    def run(self) -> None:
        pending, self._pending = self._pending, []
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
            for index, (_, then) in enumerate(pending):
                if index:
                    cursor.nextset()
                if then is not None:
                    then(cursor.fetchall() if cursor.description else [])


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

    if batch is not None and returning:
        batch.add(sql, params, inserted)
        return instance
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        pk = cursor.fetchone()[0] if returning else cursor.lastrowid
    inserted([(pk,)])
    return instance
