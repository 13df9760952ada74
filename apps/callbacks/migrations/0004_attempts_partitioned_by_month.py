"""Callback attempts partitioned by month of started_at (apps/callbacks/partitions.py), an existing table's rows
moved in batches while the platform runs (apps.common.partitions.table_swap; docs/performance.md, "Partitioning an
existing table"). Reversible: the reverse rebuilds the plain table the same way."""

from django.db import migrations, models
from psqlextra.backend.schema import PostgresSchemaEditor

from apps.common.partitions import TableSwap, months_of, table_swap

TABLE = "callbacks_callbackattempt"


def _columns_and_keys(cursor, name: str, *, partitioned: bool) -> None:
    month = ", started_at" if partitioned else ""
    cursor.execute(f"""CREATE TABLE "{name}" (LIKE {TABLE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING IDENTITY
                       INCLUDING STORAGE){" PARTITION BY RANGE (started_at)" if partitioned else ""}""")
    cursor.execute(f'ALTER TABLE "{name}" ADD CONSTRAINT "{name}_pkey" PRIMARY KEY (id{month})')
    cursor.execute(f'ALTER TABLE "{name}" ADD CONSTRAINT "{name}_unique_number" UNIQUE (event_id, number{month})')
    cursor.execute(f'CREATE INDEX "{name}_event_id" ON "{name}" (event_id)')
    cursor.execute(f"""ALTER TABLE "{name}" ADD CONSTRAINT "{name}_event_id_fk" FOREIGN KEY (event_id)
                       REFERENCES callbacks_callbackevent (id) DEFERRABLE INITIALLY DEFERRED""")


def _renames(cursor, old: dict) -> None:
    new = f"{TABLE}_rebuilt"
    cursor.execute(f'ALTER TABLE {TABLE} RENAME CONSTRAINT "{new}_pkey" TO "{old["pkey"]}"')
    cursor.execute(f'ALTER TABLE {TABLE} RENAME CONSTRAINT "{new}_unique_number" TO "{old["unique"]}"')
    cursor.execute(f'ALTER INDEX "{new}_event_id" RENAME TO "{old["index:event_id"]}"')
    cursor.execute(f'ALTER TABLE {TABLE} RENAME CONSTRAINT "{new}_event_id_fk" TO "{old["fk:event_id"]}"')


def _partitioned(schema_editor):
    def create(cursor, name):
        _columns_and_keys(cursor, name, partitioned=True)
        months_of(cursor, table=TABLE, key="started_at", parent=name,
                  editor=PostgresSchemaEditor(schema_editor.connection))
    return create


def partition(apps, schema_editor):
    table_swap(schema_editor.connection, TableSwap(table=TABLE, key="started_at", create=_partitioned(schema_editor),
                                                   mutable="finished_at IS NULL", renames=_renames))


def unpartition(apps, schema_editor):
    table_swap(schema_editor.connection, TableSwap(
        table=TABLE, key="started_at", create=lambda cursor, name: _columns_and_keys(cursor, name, partitioned=False),
        mutable="finished_at IS NULL", renames=_renames))


class Migration(migrations.Migration):
    # Each batch of the copy is its own transaction (apps.common.partitions.table_swap).
    atomic = False

    dependencies = [
        ("callbacks", "0003_refund_callback"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveConstraint(model_name="callbackattempt", name="callback_attempt_unique_number"),
                migrations.AddConstraint(
                    model_name="callbackattempt",
                    constraint=models.UniqueConstraint(fields=("event", "number", "started_at"),
                                                       name="callback_attempt_unique_number"),
                ),
            ],
            database_operations=[migrations.RunPython(partition, unpartition, elidable=False)],
        ),
    ]
