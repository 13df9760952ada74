"""The action audit partitioned by month of created_at (apps/common/audit_partitions.py), an existing table's rows
moved in batches while the platform runs (apps.common.partitions.table_swap; docs/performance.md, "Partitioning an
existing table"). Its append-only guards come along on the new table. Reversible: the reverse rebuilds the plain
table the same way."""

from django.db import migrations
from psqlextra.backend.schema import PostgresSchemaEditor

from apps.common.partitions import TableSwap, months_of, table_rebuilt_like, table_renames_back, table_swap

TABLE = "common_auditlog"


def _swap(schema_editor, *, partitioned: bool) -> TableSwap:
    def create(cursor, name):
        table_rebuilt_like(cursor, table=TABLE, name=name, key="created_at" if partitioned else None)
        if partitioned:
            months_of(cursor, table=TABLE, key="created_at", parent=name,
                      editor=PostgresSchemaEditor(schema_editor.connection))

    # Audit rows never change: nothing copied needs copying again.
    return TableSwap(table=TABLE, key="created_at", create=create, mutable="false",
                     renames=lambda cursor, old: table_renames_back(cursor, table=TABLE, old=old))


def partition(apps, schema_editor):
    table_swap(schema_editor.connection, _swap(schema_editor, partitioned=True))


def unpartition(apps, schema_editor):
    table_swap(schema_editor.connection, _swap(schema_editor, partitioned=False))


class Migration(migrations.Migration):
    # Each batch of the copy is its own transaction (apps.common.partitions.table_swap).
    atomic = False

    dependencies = [
        ("common", "0012_overview_and_adjust_balance_moved"),
    ]

    operations = [migrations.RunPython(partition, unpartition, elidable=False)]
