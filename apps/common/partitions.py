"""Monthly partitions of the append-only tables that grow with traffic, and their retention (docs/architecture.md,
"Partitioned history").

django-postgres-extra plans the partitions (its monthly strategy, its partitioning manager) and writes their DDL
(its schema editor); beat runs the plan: the current month and PARTITIONS_AHEAD_MONTHS ahead are created every 6
hours, and a month older than the table's retention is detached and dropped daily, unless its domain says a row of it
is still needed. Each domain registers its tables from its own module (`apps/<domain>/partitions.py`); this module knows
none of them.

The models stay plain Django models: psqlextra's own model base turns the key into a composite primary key
(`id`, the month column), which Django's admin cannot show. The database's key is (id, month column), as
PostgreSQL requires of a partitioned table; `id` stays unique because one identity sequence numbers every row.
"""

import itertools
import re
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from dateutil.relativedelta import relativedelta
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, models, transaction
from django.utils import timezone
from psqlextra.backend.introspection import PostgresIntrospection
from psqlextra.backend.schema import PostgresSchemaEditor
from psqlextra.models.options import PostgresPartitionedModelOptions
from psqlextra.partitioning import (PostgresCurrentTimePartitioningStrategy, PostgresPartitioningConfig,
                                    PostgresPartitioningManager, PostgresTimePartition, PostgresTimePartitionSize)
from psqlextra.partitioning.constants import AUTO_PARTITIONED_COMMENT
from psqlextra.types import PostgresPartitioningMethod

from apps.common.locks import advisory_xact_lock

logger = logging.getLogger(__name__)

MONTH = PostgresTimePartitionSize(months=1)


@dataclass(frozen=True)
class PartitionedTable:
    """An append-only table partitioned by month of `key`, as its domain registers it.

    `still_needed(start, end)` says why rows with `key` in [start, end) must be kept (a non-empty reason), or None.
    Retention checks it, then detaches the month without a lock on the table's readers and writers; so a month
    that is not needed must never become needed again (rows are written in the current month only)."""

    model: type[models.Model]
    key: str
    retention_setting: str  # the setting holding the months kept: the current one and those before it
    still_needed: Callable[[datetime, datetime], str | None]

    @property
    def table(self) -> str:
        return self.model._meta.db_table

    def months_kept(self) -> int:
        return getattr(settings, self.retention_setting)


_tables: dict[str, PartitionedTable] = {}


def partitioned_table_register(spec: PartitionedTable) -> None:
    if spec.table in _tables:
        raise ImproperlyConfigured(f"partitioned table {spec.table!r} is registered twice")
    # What psqlextra's schema editor reads of a partitioned model (its method and key), set on the plain model.
    spec.model._partitioning_meta = PostgresPartitionedModelOptions(method=PostgresPartitioningMethod.RANGE,
                                                                    key=[spec.key])
    _tables[spec.table] = spec


def partitioned_tables() -> list[PartitionedTable]:
    return list(_tables.values())


class _MonthsAt(PostgresCurrentTimePartitioningStrategy):
    """psqlextra's monthly strategy at a given time: the month of `now` and `ahead` after it are created, months
    `kept` or more before it are deleted."""

    def __init__(self, *, now: datetime, ahead: int, kept: int) -> None:
        super().__init__(size=MONTH, count=ahead + 1, max_age=relativedelta(months=kept))
        self._now = now

    def get_start_datetime(self) -> datetime:
        return _midnight(self._now)


def _midnight(moment: datetime) -> datetime:
    """The UTC day of `moment` at 00:00, naive as psqlextra's bounds are (read in the connection's UTC): psqlextra
    keeps the hour of the time it is given in a month's bounds, so partitions made at different hours would
    overlap."""
    return moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0, tzinfo=None)


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC)


class _Manager(PostgresPartitioningManager):
    """psqlextra's manager on the project's plain PostgreSQL backend: it reads the partitions through psqlextra's
    introspection rather than the connection's own."""

    @staticmethod
    def _get_partitioned_table(connection, model):
        with connection.cursor() as cursor:
            table = PostgresIntrospection(connection).get_partitioned_table(cursor, model._meta.db_table)
        if table is None:
            raise ImproperlyConfigured(f"{model._meta.db_table} is not partitioned: run `manage.py migrate`")
        return table


def _plan(*, now: datetime, create: bool):
    configs = [PostgresPartitioningConfig(model=spec.model, strategy=_MonthsAt(
        now=now, ahead=settings.PARTITIONS_AHEAD_MONTHS, kept=spec.months_kept())) for spec in _tables.values()]
    return _Manager(configs).plan(skip_create=not create, skip_delete=create)


def month_partition(moment: datetime) -> PostgresTimePartition:
    """The month of `moment` (UTC) as psqlextra names and bounds it: `<table>_2026_nov`, [Nov 1, Dec 1)."""
    return PostgresTimePartition(size=MONTH, start_datetime=MONTH.start(_midnight(moment)))


def partition_add(editor: PostgresSchemaEditor, *, parent: str, name: str, partition: PostgresTimePartition) -> None:
    """Create `partition` of table `parent` as table `name`, marked as psqlextra marks the partitions it manages
    (only those are ever dropped by retention). Used where the parent's name is not yet the model's table (the
    migration that partitions an existing table); everywhere else psqlextra's plan creates them."""
    editor.execute(editor.sql_add_range_partition % (editor.quote_name(name), editor.quote_name(parent), "%s", "%s"),
                   (partition.from_values, partition.to_values))
    editor.set_comment_on_table(name, AUTO_PARTITIONED_COMMENT)


def partitions_create(*, now: datetime | None = None) -> list[str]:
    """Create every registered table's missing partitions: the month of `now` and PARTITIONS_AHEAD_MONTHS after it.
    Idempotent; concurrent runs wait for each other. Returns the tables created."""
    now = now or timezone.now()
    created = []
    with transaction.atomic(durable=True):
        advisory_xact_lock("partitions")
        editor = PostgresSchemaEditor(connection)
        for model_plan in _plan(now=now, create=True).model_plans:
            for partition in model_plan.creations:
                partition.create(model_plan.config.model, editor, comment=AUTO_PARTITIONED_COMMENT)
                created.append(editor.create_partition_table_name(model_plan.config.model, partition.name()))
    if created:
        logger.info("partitions created: %s", ", ".join(created))
    return created


_DETACH_PENDING = """SELECT i.inhdetachpending FROM pg_inherits i
  JOIN pg_class c ON c.oid = i.inhrelid
 WHERE c.relname = %s"""


@dataclass
class Retention:
    dropped: list[str]
    kept: dict[str, str]  # partition -> why it is still needed


def partitions_drop_expired(*, now: datetime | None = None) -> Retention:
    """Detach and drop each registered table's months older than its retention, but a month its domain still needs
    (kept, with the reason, and tried again on the next run). Runs outside a transaction: a partition is detached
    CONCURRENTLY, so readers and writers of the table never wait for it."""
    now = now or timezone.now()
    result = Retention([], {})
    for model_plan in _plan(now=now, create=False).model_plans:
        spec = _tables[model_plan.config.model._meta.db_table]
        for partition in model_plan.deletions:
            name = f"{spec.table}_{partition.name()}"
            reason = spec.still_needed(_aware(partition.start_datetime), _aware(partition.end_datetime))
            if reason:
                result.kept[name] = reason
                logger.warning("partition %s is past its retention but kept: %s", name, reason)
                continue
            _detach_and_drop(spec.table, name)
            result.dropped.append(name)
    if result.dropped:
        logger.info("partitions dropped: %s", ", ".join(result.dropped))
    return result


def _detach_and_drop(parent: str, name: str) -> None:
    if connection.in_atomic_block:
        raise RuntimeError("partitions_drop_expired detaches concurrently: call it outside a transaction")
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(_DETACH_PENDING, [name])
        row = cursor.fetchone()
        if row is not None:
            # A detach interrupted before its second transaction leaves the partition pending: finish it.
            how = "FINALIZE" if row[0] else "CONCURRENTLY"
            cursor.execute(f"ALTER TABLE {quote(parent)} DETACH PARTITION {quote(name)} {how}")
        cursor.execute(f"DROP TABLE IF EXISTS {quote(name)}")


# Rebuilding an existing table as a partitioned one while the platform runs (the migrations that partition a table):
# the rows are copied in batches of BATCH_ROWS, each its own short transaction, while the old table still takes
# writes; then one short transaction under the old table's exclusive lock copies what arrived or changed since, and
# swaps the names. docs/performance.md, "Partitioning an existing table", has the figures of a million rows.
BATCH_ROWS = 20_000
SWAP_LOCK_TIMEOUT = "5s"


@dataclass(frozen=True)
class TableSwap:
    """`table` rebuilt as `create(cursor, name)` makes it under the temporary name `name`. `mutable` is the condition
    of the rows that may still change after they were copied (re-copied under the lock); `renames` gives, after the
    swap, the new table's constraints and indexes their final names (the old table's, which Django's migration
    state knows)."""

    table: str
    key: str  # the month column: rows written recently are looked for in the recent months only
    create: Callable
    mutable: str
    renames: Callable  # (cursor, old_names: dict) -> None
    batch_rows: int = BATCH_ROWS


def _names_of(cursor, table: str) -> dict[str, str]:
    """The table's constraints and indexes by kind: `pkey`, `fk:<column>`, `index:<column>`, `unique`, `sequence`."""
    names = {}
    cursor.execute("""SELECT c.conname, c.contype, a.attname FROM pg_constraint c
                        LEFT JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
                       WHERE c.conrelid = %s::regclass AND c.contype IN ('p', 'f', 'u')""", [table])
    for name, kind, column in cursor.fetchall():
        names[{"p": "pkey", "f": f"fk:{column}", "u": "unique"}[kind]] = name
    cursor.execute("""SELECT i.indexrelid::regclass::text, a.attname FROM pg_index i
                        JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                       WHERE i.indrelid = %s::regclass AND NOT i.indisunique AND i.indnatts = 1""", [table])
    for name, column in cursor.fetchall():
        names[f"index:{column}"] = name
    cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
    names["sequence"] = cursor.fetchone()[0]
    return names


def table_swap(connection, swap: TableSwap) -> dict:
    """Rebuild `swap.table` (see TableSwap) without holding a lock longer than the last short transaction. Call
    outside a transaction (a migration with `atomic = False`). Returns the rows copied, the batches and the
    milliseconds the table was locked."""
    table, new = swap.table, f"{swap.table}_rebuilt"
    quote = connection.ops.quote_name
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {quote(new)}")  # left by an earlier run that stopped before the swap
        swap.create(cursor, new)
    copy = (f"WITH copied AS (INSERT INTO {quote(new)} SELECT * FROM {quote(table)} WHERE id > %s AND id <= %s "
            f"RETURNING *) SELECT count(*), coalesce(array_agg(id) FILTER (WHERE {swap.mutable}), '{{}}') FROM copied")
    batches, low, high, changing = 0, 0, 0, []
    for passes in itertools.count():
        # Up to the highest id seen, then again for the rows written meanwhile, until less than a batch is left.
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT coalesce(max(id), 0) FROM {quote(table)}")
            high = cursor.fetchone()[0]
        if passes and high - low < swap.batch_rows:
            break
        while low < high:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(copy, [low, low + swap.batch_rows])
                changing += cursor.fetchone()[1]
            low, batches = low + swap.batch_rows, batches + 1
    # Rows copied while they could still change are copied again. So are the last batches' rows missing from the
    # copy: an id is taken at INSERT and its row seen at COMMIT, so a row of a transaction that was still open when
    # its batch was copied is missing; the platform's transactions that write these rows last milliseconds, not the
    # time of a batch. Most of it once before the lock, then under the lock what changed or arrived since.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SELECT coalesce(max(id), 0) FROM {quote(table)}")
        settled = cursor.fetchone()[0]
        changing = _recopy(cursor, swap, new, changing=changing, after=max(0, low - 2 * swap.batch_rows))
    started = time.monotonic()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{SWAP_LOCK_TIMEOUT}'")
        cursor.execute(f"LOCK TABLE {quote(table)} IN ACCESS EXCLUSIVE MODE")
        _recopy(cursor, swap, new, changing=changing, after=max(0, settled - swap.batch_rows // 10))
        cursor.execute(f"SELECT max(id) FROM {quote(table)}")
        last = cursor.fetchone()[0]
        cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), %s, %s)", [new, last or 1, last is not None])
        old_names = _names_of(cursor, table)
        cursor.execute(f"DROP TABLE {quote(table)}")
        cursor.execute(f"ALTER TABLE {quote(new)} RENAME TO {quote(table)}")
        cursor.execute(f"ALTER SEQUENCE {_names_of(cursor, table)['sequence']} "
                       f"RENAME TO {quote(old_names['sequence'].split('.')[-1])}")
        swap.renames(cursor, old_names)
    locked_ms = round((time.monotonic() - started) * 1000, 1)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {quote(table)}")
        figures = {"rows": cursor.fetchone()[0], "batches": batches, "locked_ms": locked_ms}
    logger.info("%s rebuilt: %s rows in %s batches, locked %s ms", table, figures["rows"], batches, locked_ms)
    return figures


def _recopy(cursor, swap: TableSwap, new: str, *, changing: list[int], after: int) -> list[int]:
    """Copy again the rows `changing` (ids copied while they could still change) and copy the rows with an id above
    `after` missing from the copy. Both are recent: the oldest month among them bounds the statements on the new
    table to the months since. Returns the rows copied again that can still change."""
    quote = cursor.db.ops.quote_name
    table, key = quote(swap.table), quote(swap.key)
    # Each of the two sets by itself, so that each is found through the primary key (their OR is a scan of every row).
    sets = [("id = ANY(%s)", changing), ("id > %s", after)]
    cursor.execute(f"SELECT least({', '.join(f'(SELECT min({key}) FROM {table} WHERE {where})' for where, _ in sets)})",
                   [value for _, value in sets])
    since = cursor.fetchone()[0]
    if since is None:
        return []
    cursor.execute(f"DELETE FROM {quote(new)} WHERE id = ANY(%s) AND {key} >= %s", [changing, since])
    still = []
    for where, value in sets:
        cursor.execute(f"""WITH copied AS (INSERT INTO {quote(new)} SELECT * FROM {table} o
                            WHERE o.{where}
                              AND NOT EXISTS (SELECT FROM {quote(new)} n WHERE n.id = o.id AND n.{key} >= %s)
                           RETURNING *)
                           SELECT coalesce(array_agg(id) FILTER (WHERE {swap.mutable}), '{{}}') FROM copied""",
                       [value, since])
        still += cursor.fetchone()[0]
    return still



REBUILT = "_rb"  # the suffix of the rebuilt table's indexes and constraints until the swap gives them the old names


def table_rebuilt_like(cursor, *, table: str, name: str, key: str | None) -> None:
    """Create table `name` as `table` is: its columns (defaults, checks, identity), primary key, other indexes, foreign
    keys and triggers; partitioned by range of `key` when given (the key then joins the primary key), a plain table
    when not. The indexes and foreign keys are named as `table`'s with REBUILT after them (`table_renames_back` gives
    them the old names after the swap). For a table whose only unique key is its `id`."""
    quote = cursor.db.ops.quote_name
    cursor.execute(f"""CREATE TABLE {quote(name)} (LIKE {quote(table)} INCLUDING DEFAULTS INCLUDING CONSTRAINTS
                       INCLUDING IDENTITY INCLUDING STORAGE){f" PARTITION BY RANGE ({quote(key)})" if key else ""}""")
    cursor.execute(f"ALTER TABLE {quote(name)} ADD CONSTRAINT {quote(name + '_pkey')} "
                   f"PRIMARY KEY (id{f', {quote(key)}' if key else ''})")
    cursor.execute("""SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid), i.indisunique
                        FROM pg_index i WHERE i.indrelid = %s::regclass AND NOT i.indisprimary""", [table])
    for index, definition, unique in cursor.fetchall():
        if unique:
            raise ImproperlyConfigured(f"{table} has the unique index {index}: name its key in its own migration")
        # A partitioned table's index reads "ON ONLY <table>": the new table's covers its partitions.
        cursor.execute(re.sub(rf"^CREATE INDEX {re.escape(index)} ON (ONLY )?public\.{table} ",
                              f"CREATE INDEX {quote(index + REBUILT)} ON public.{quote(name)} ", definition))
    cursor.execute("""SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
                       WHERE conrelid = %s::regclass AND contype = 'f'""", [table])
    for constraint, definition in cursor.fetchall():
        cursor.execute(f"ALTER TABLE {quote(name)} ADD CONSTRAINT {quote(constraint + REBUILT)} {definition}")
    cursor.execute("""SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger
                       WHERE tgrelid = %s::regclass AND NOT tgisinternal""", [table])
    for trigger, definition in cursor.fetchall():  # the append-only guards: the same names, on the new table
        cursor.execute(definition.replace(f" ON public.{table} ", f" ON public.{quote(name)} ", 1))


def table_renames_back(cursor, *, table: str, old: dict[str, str]) -> None:
    """After the swap of a table made by `table_rebuilt_like`: its primary key, indexes and foreign keys get the names
    the old table's had (the ones Django's migration state knows)."""
    quote = cursor.db.ops.quote_name
    cursor.execute(f"ALTER TABLE {quote(table)} RENAME CONSTRAINT {quote(f'{table}_rebuilt_pkey')} "
                   f"TO {quote(old['pkey'])}")
    cursor.execute("""SELECT i.indexrelid::regclass::text FROM pg_index i
                       WHERE i.indrelid = %s::regclass AND NOT i.indisprimary""", [table])
    for (index,) in cursor.fetchall():
        cursor.execute(f"ALTER INDEX {quote(index)} RENAME TO {quote(index.removesuffix(REBUILT))}")
    cursor.execute("SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'f'", [table])
    for (constraint,) in cursor.fetchall():
        cursor.execute(f"ALTER TABLE {quote(table)} RENAME CONSTRAINT {quote(constraint)} "
                       f"TO {quote(constraint.removesuffix(REBUILT))}")


def months_of(cursor, *, table: str, key: str, editor: PostgresSchemaEditor, parent: str) -> None:
    """Create on `parent` every month from the oldest row's of `table` to PARTITIONS_AHEAD_MONTHS after this one (or
    after the newest row's, stamped by a clock ahead), named as psqlextra names `table`'s (the migration that
    partitions an existing table)."""
    quote = cursor.db.ops.quote_name
    cursor.execute(f"SELECT min({quote(key)}), max({quote(key)}) FROM {quote(table)}")
    oldest, newest = cursor.fetchone()
    now = max(timezone.now(), newest or timezone.now())
    month = month_partition(oldest or now)
    last = month_partition(now + relativedelta(months=settings.PARTITIONS_AHEAD_MONTHS)).start_datetime
    while month.start_datetime <= last:
        partition_add(editor, parent=parent, name=f"{table}_{month.name()}", partition=month)
        month = month_partition(month.end_datetime.replace(tzinfo=UTC))
