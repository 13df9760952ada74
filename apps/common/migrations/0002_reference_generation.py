"""Reference-data generation (apps.common.refcache): a statement trigger on each reference table sets the one
row of common_referencegeneration to a fresh value from a sequence, in the writer's transaction.

A sequence never hands out a value twice, even across rolled-back transactions, so a generation a process has
seen can never come back with other data behind it. TRUNCATE is covered too (test flushes). SQLite (the
embedded development default) has no trigger: there refcache does not cache.
"""

from django.db import migrations, models

REFERENCE_TABLES = (
    "merchants_merchant", "merchants_app", "merchants_merchantkey", "merchants_merchantcurrency",
    "merchants_product", "merchants_merchantproduct", "currencies_currency", "channels_channel",
    "channels_bankcode",
)

POSTGRES_UP = """
CREATE SEQUENCE common_reference_generation_seq;
CREATE OR REPLACE FUNCTION common_reference_generation_bump() RETURNS trigger AS $$
BEGIN
    INSERT INTO common_referencegeneration (id, value) VALUES (1, nextval('common_reference_generation_seq'))
        ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
INSERT INTO common_referencegeneration (id, value) VALUES (1, nextval('common_reference_generation_seq'));
""" + "".join(
    f"CREATE TRIGGER {table}_reference_generation AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table}\n"
    f"    FOR EACH STATEMENT EXECUTE FUNCTION common_reference_generation_bump();\n"
    for table in REFERENCE_TABLES
)

POSTGRES_DOWN = "".join(f"DROP TRIGGER IF EXISTS {table}_reference_generation ON {table};\n"
                        for table in REFERENCE_TABLES) + """
DROP FUNCTION IF EXISTS common_reference_generation_bump();
DROP SEQUENCE IF EXISTS common_reference_generation_seq;
"""


def _on_postgres(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("common", "0001_initial"),
        ("merchants", "0001_initial"),
        ("currencies", "0001_initial"),
        ("channels", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="ReferenceGeneration",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("value", models.BigIntegerField()),
            ],
        ),
        migrations.RunPython(_on_postgres(POSTGRES_UP), _on_postgres(POSTGRES_DOWN)),
    ]
