"""The flush after a `transaction=True` test without re-creating what `post_migrate` made, when it is unchanged.

Django's TransactionTestCase empties the database after each such test (`manage.py flush`: one TRUNCATE of every
table) and then sends `post_migrate`, which writes back the content types, the ~283 permissions and the staff roles
(apps/payout/apps.py: the groups, their permissions and, through the settings trail's trigger, their history rows):
~100 statements, 0.09 s of the test process's CPU per flush on the 2-core host (docs/performance.md,
"Suite"), after each of the suite's ~220 transactional tests.

Here, after a full flush the tables `post_migrate` filled are remembered with a digest of their rows. At the next
flush, if those tables still hold exactly those rows (the test did not add a role, a permission or a content type),
every other table is emptied and `post_migrate` is not sent: the database is left as the full flush would leave it,
the kept rows being the ones its `post_migrate` wrote last time. Otherwise the full flush runs, as Django's.

Emptied by DELETE, not TRUNCATE (`empty`): a TRUNCATE of the ~66 tables gives each table and each of its ~270
indexes a new file and invalidates every session's cache of them: 1.0-3.5 s of wall time and 0.11-0.54 s of
PostgreSQL CPU per flush on the loaded 2-core host, against 0.003-0.03 s and ~0 for deleting the few rows a test
leaves (docs/performance.md, "Measured changes"). The tables are locked first as TRUNCATE locks them (ACCESS EXCLUSIVE,
so a write still in flight from another session ends before, and is emptied too); the rows go with the triggers and
foreign-key checks off for the transaction (`session_replication_role = replica`: every table in the set is emptied,
and the settings trail's and the ledger's row triggers are not what a flush is); then the reference generation moves
once, as the reference tables' TRUNCATE triggers move it in a full flush (apps/common/refcache.py). A database role
that is not a superuser cannot turn triggers off: the TRUNCATE then, as before.
"""

from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connections, transaction
from django.test import TestCase, TransactionTestCase

_REWRITTEN_BY_TRIGGERS = {"common_referencegeneration"}
_kept: dict[str, dict[str, str]] = {}  # per database alias: {table: digest of its rows} after the last full flush
_django_fixture_teardown = TransactionTestCase._fixture_teardown


def _digests(connection, tables) -> dict[str, str]:
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(
            f"SELECT {table!r}, md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM {quote(table)} t"
            for table in tables))
        return dict(cursor.fetchall())


def _non_empty(connection, tables) -> list[str]:
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(f"SELECT {table!r} WHERE EXISTS (SELECT 1 FROM {quote(table)})"
                                          for table in tables))
        return [row[0] for row in cursor.fetchall()]


# What each reference table's TRUNCATE trigger runs (apps/common/refcache.py: common_reference_generation_bump).
_GENERATION_BUMP = ("INSERT INTO common_referencegeneration (id, value) VALUES (1, nextval('common_reference_generation_seq')) "
                    "ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value")


def superuser(connection) -> bool:
    """Whether `empty` can turn triggers off on this connection (`session_replication_role` needs a superuser)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('is_superuser') = 'on'")
        return cursor.fetchone()[0]


def referencing(connection, tables) -> list[str]:
    """`tables` and every table that references one of them by a foreign key, transitively: what `TRUNCATE tables
    CASCADE` empties."""
    with connection.cursor() as cursor:
        cursor.execute("""
            WITH RECURSIVE closure(rel) AS (
                SELECT oid FROM pg_class WHERE relname = ANY(%s) AND relkind IN ('r', 'p')
                    AND relnamespace = 'public'::regnamespace
                UNION SELECT con.conrelid FROM pg_constraint con JOIN closure ON con.confrelid = closure.rel
                    WHERE con.contype = 'f')
            SELECT relname FROM closure JOIN pg_class ON pg_class.oid = closure.rel ORDER BY relname""", [list(tables)])
        return [row[0] for row in cursor.fetchall()]


def empty(connection, tables) -> None:
    """Every row of `tables` deleted, as their TRUNCATE would leave them (see the module's docstring); a superuser
    connection only (`superuser`)."""
    quote = connection.ops.quote_name
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {', '.join(quote(table) for table in tables)} IN ACCESS EXCLUSIVE MODE")
        with_rows = _non_empty(connection, tables)
        if with_rows:
            cursor.execute("SET LOCAL session_replication_role = replica")
            cursor.execute("; ".join(f"DELETE FROM {quote(table)}" for table in with_rows))
            cursor.execute("SET LOCAL session_replication_role = origin")
        cursor.execute(_GENERATION_BUMP)


def flush(alias: str) -> bool:
    """Empty the database `alias` as `manage.py flush` + `post_migrate` would; True if post_migrate's tables were
    kept (unchanged), False if the full flush ran."""
    connection = connections[alias]
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    kept = _kept.get(alias)
    if kept and _digests(connection, kept) == kept:
        emptied = [table for table in tables if table not in kept]
        if superuser(connection):
            empty(connection, emptied)
        else:
            connection.ops.execute_sql_flush(connection.ops.sql_flush(
                no_style(), emptied, reset_sequences=False, allow_cascade=False))
        return True
    call_command("flush", verbosity=0, interactive=False, database=alias, reset_sequences=False,
                 allow_cascade=False, inhibit_post_migrate=False)
    written = [table for table in _non_empty(connection, tables) if table not in _REWRITTEN_BY_TRIGGERS]
    _kept[alias] = _digests(connection, written) if written else {}
    return False


def _fixture_teardown(self):
    """TransactionTestCase's teardown (Django 5.2), its flush the one above when Django's would send post_migrate."""
    if isinstance(self, TestCase) or self.available_apps is not None or self.serialized_rollback:
        return _django_fixture_teardown(self)
    for alias in self._databases_names(include_mirrors=False):
        flush(alias)


def install() -> None:
    TransactionTestCase._fixture_teardown = _fixture_teardown
