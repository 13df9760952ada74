"""The flush after a `transaction=True` test without re-creating what `post_migrate` made, when it is unchanged.

Django's TransactionTestCase empties the database after each such test (`manage.py flush`: one TRUNCATE of every
table) and then sends `post_migrate`, which writes back the content types, the ~283 permissions and the staff roles
(apps/payout/apps.py: the groups, their permissions and, through the settings trail's trigger, their history rows):
~100 statements, 0.09 s of the test process's CPU per flush on the 2-core host (docs/performance.md, helper
"suite3"), after each of the suite's ~220 transactional tests.

Here, after a full flush the tables `post_migrate` filled are remembered with a digest of their rows. At the next
flush, if those tables still hold exactly those rows (the test did not add a role, a permission or a content type),
every other table is truncated (the same TRUNCATE, without them) and `post_migrate` is not sent: the database is left
as the full flush would leave it, the kept rows being the ones its `post_migrate` wrote last time. Otherwise the full
flush runs, as Django's. The reference generation row is not kept: the reference tables' TRUNCATE triggers write it
back as in a full flush (apps/common/refcache.py).
"""

from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connections
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


def flush(alias: str) -> bool:
    """Empty the database `alias` as `manage.py flush` + `post_migrate` would; True if post_migrate's tables were
    kept (unchanged), False if the full flush ran."""
    connection = connections[alias]
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    kept = _kept.get(alias)
    if kept and _digests(connection, kept) == kept:
        connection.ops.execute_sql_flush(connection.ops.sql_flush(
            no_style(), [table for table in tables if table not in kept], reset_sequences=False, allow_cascade=False))
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
