"""The `bootstrapped` fixture puts back the rows of the command's first run (tests/support/bootstrap_rows.py): every
table must then hold what `manage.py bootstrap` itself writes, the settings trail's events and context included."""

import datetime as dt
import json

import time_machine
from django.db import connection, transaction

from apps.merchants.models import PlatformKey
from apps.merchants.selectors import platform_private_key

# Differ between any two runs of the command: ids the sequences hand out (and the columns that point at them), the
# Fernet token (a random IV; the key inside is compared below) and the reference generation (a fresh value each time).
RUN_SPECIFIC = ["id", "pgh_id", "pgh_obj_id", "pgh_context_id", "object_id", "private_key_encrypted"]


def every_table() -> dict[str, list[str]]:
    quote = connection.ops.quote_name
    tables = sorted(connection.introspection.django_table_names(only_existing=True, include_views=False))
    contents = {}
    with connection.cursor() as cursor:
        for table in tables:
            if table == "common_referencegeneration":
                continue
            cursor.execute(f"SELECT to_jsonb(t) - %s::text[] FROM {quote(table)} t", [RUN_SPECIFIC])
            contents[table] = sorted(json.dumps(row, sort_keys=True) for (row,) in cursor.fetchall())
    return contents


def after(write) -> dict[str, list[str]]:
    """Every table after `write`, rolled back afterwards (a savepoint, not an atomic block: the platform key's rotation
    is durable, and may only be nested in the test's own transaction)."""
    savepoint = transaction.savepoint()
    write()
    contents = every_table()
    contents["platform private key"] = [platform_private_key(PlatformKey.objects.get(is_current=True))
                                        .private_numbers().d]
    transaction.savepoint_rollback(savepoint)
    return contents


def _put_back(bootstrap_rows) -> None:
    assert bootstrap_rows.put_back(), "nothing was put back"


def test_the_rows_put_back_are_what_the_command_writes(db, bootstrap_command, _bootstrap_rows, bootstrap_platform_key):
    # The clock stands still (time_machine; PostgreSQL's now() is the transaction's): the timestamps compare exactly.
    with time_machine.travel(dt.datetime(2026, 3, 1, 23, 59, 59, 500000, tzinfo=dt.UTC), tick=False):
        after(lambda: _bootstrap_rows.run(bootstrap_command))  # the first run of this process, if no test made it
        assert _bootstrap_rows.rows is not None
        put_back = after(lambda: _put_back(_bootstrap_rows))
        ran = after(bootstrap_command)
    assert put_back == ran
    assert ran["merchants_platformkey"] and ran["pghistory_context"] and ran["currencies_currencyevent"]
    assert ran["platform private key"] == [bootstrap_platform_key.private_numbers().d]
