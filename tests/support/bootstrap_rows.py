"""The `bootstrapped` fixture's rows (tests/conftest.py): `manage.py bootstrap` runs once per process, and every later
test gets the rows it wrote put back (an emptiness check, then one insert per table sent in one execute) instead of
running the command again.

The command ran in some 900 tests of the suite: about 30 statements (get_or_create per sandbox channel, the seeds'
reads back, the platform key), each with the settings trail's context in front, 0.3-0.85 s of a test's set-up on the
2-core host. What it writes into an empty reference schema depends only on the settings and the clock, so the rows of
its first run are the rows of every run (docs/testing.md, "The bootstrapped fixture"). Put back, they go through the
same triggers as the command's own inserts: the settings trail writes its event rows under the same context (command
`bootstrap`, the OS user), the reference generation moves, foreign keys are checked. Values the command took from the
clock (the platform key's and the audit row's `created_at`) are the test's clock (time_machine included); ids are the
ones of the first run (the sequences are already past them: nothing restarts them in the suite).

The first run is kept from a test in its own transaction (pytest-django's `db`), where nothing else writes. The command
itself runs, as it always did, when a test's settings differ from the suite's (a `settings` change or an
override made before `bootstrapped`: the environment, the key's encryption key), or when a reference table the command
writes already holds a row (a fixture that made its own currency or product first).
"""

import json
from datetime import datetime

from django.apps import apps
from django.conf import UserSettingsHolder, settings
from django.db import connection, models, transaction
from django.utils import timezone

from apps.common.history import command_context


def _generated_tables() -> set[str]:
    """Tables the database writes by itself when the command's rows go in: the settings trail's events and contexts
    and the reference generation (apps.common.refcache). Their rows come from the triggers, not from the copy."""
    from pghistory.models import Context, Event

    from apps.common.models import ReferenceGeneration

    return {model._meta.db_table for model in apps.get_models()
            if issubclass(model, (Event, Context, ReferenceGeneration))}


def _row_counts(cursor, tables: list[str]) -> dict[str, int]:
    quote = connection.ops.quote_name
    cursor.execute(" UNION ALL ".join(f"SELECT {table!r}, count(*) FROM {quote(table)}" for table in tables))
    return dict(cursor.fetchall())


def _clock_columns(table: str) -> set[str]:
    model = next((model for model in apps.get_models() if model._meta.db_table == table), None)
    return {field.column for field in model._meta.concrete_fields
            if isinstance(field, models.DateTimeField)} if model else set()


def _settings_as_the_suite_has_them() -> bool:
    """No override is in force (pytest-django's `settings` fixture and override_settings both wrap the settings in a
    UserSettingsHolder while a change is in force)."""
    return not isinstance(settings._wrapped, UserSettingsHolder)


class BootstrapRows:
    """One per test process (a session fixture): the rows of the first run, per table, and where the clock went."""

    def __init__(self):
        self.rows: dict[str, list[dict]] | None = None
        self.clock_cells: dict[str, list[tuple[int, str]]] = {}  # per table: (row index, column) the clock filled

    def run(self, command) -> None:
        """Run `command` (the real bootstrap); keep what it wrote if it is what every run writes."""
        # Kept only from a test inside its own transaction (pytest-django's `db`): nothing else writes to the database
        # there, so the row counts changed by the command alone (a `transaction=True` test may have a live worker or a
        # drill's processes writing beside it).
        if self.rows is not None or not _settings_as_the_suite_has_them() or not connection.in_atomic_block:
            command()
            return
        tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
        with connection.cursor() as cursor:
            before = _row_counts(cursor, tables)
            started = timezone.now()
            command()
            finished = timezone.now()
            after = _row_counts(cursor, tables)
            generated = _generated_tables()
            written = sorted(table for table in tables if after[table] != before[table] and table not in generated)
            if any(before[table] for table in written):
                return  # rows were there already (a fixture's): this run is not every run's
            rows, clock_cells = {}, {}
            for table in written:
                cursor.execute(f"SELECT coalesce(json_agg(t), '[]') FROM {connection.ops.quote_name(table)} t")
                rows[table] = cursor.fetchone()[0]
                clock_cells[table] = [
                    (index, column) for index, row in enumerate(rows[table]) for column in _clock_columns(table)
                    if row.get(column) and started <= datetime.fromisoformat(row[column]) <= finished]
        self.rows, self.clock_cells = rows, clock_cells

    def put_back(self) -> bool:
        """The first run's rows into this test's database, in two round trips; False (nothing done) when the command
        must run instead: no first run yet, settings overridden, or a table it writes not empty."""
        if self.rows is None or not _settings_as_the_suite_has_them():
            return False
        quote = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.execute("SELECT " + " AND ".join(f"NOT EXISTS (SELECT 1 FROM {quote(table)})"
                                                    for table in self.rows))
            if not cursor.fetchone()[0]:
                return False
        now = timezone.now().isoformat()
        batches = []
        for table, rows in self.rows.items():
            rows = [dict(row) for row in rows]
            for index, column in self.clock_cells[table]:
                rows[index][column] = now
            batches.append(json.dumps(rows))
        # The command's own context (apps.common.management.json_command): the trail's events name it and its operator.
        with transaction.atomic(), command_context(command="bootstrap"), connection.cursor() as cursor:
            cursor.execute("; ".join(f"INSERT INTO {quote(table)} "
                                     f"SELECT * FROM json_populate_recordset(NULL::{quote(table)}, %s)"
                                     for table in self.rows), batches)
        return True
