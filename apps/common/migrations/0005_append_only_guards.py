"""Audit rows are append-only by the database's own rule, with no way around it from a session.

The event tables' and AuditLog's pgtrigger "Protect" triggers can be switched off by any session that sets the
`pgtrigger.ignore` variable (SELECT set_config('pgtrigger.ignore', '{<trigger name>}', true): pgtrigger's own escape
hatch, open to every role). These triggers have none: a row of the action audit, of any settings history table or
the "who" of its pghistory context cannot be updated or deleted by anyone but the tables' owner (who could drop a
trigger). pghistory itself only ever adds keys to a context's metadata (a nested context), which stays allowed.
tests/common/test_settings_history.py checks that every event table carries the guard.
"""

from django.db import migrations

EVENT_TABLES = [
    "common_auditlog",
    "currencies_currencyevent",
    "merchants_merchantevent",
    "merchants_appevent",
    "merchants_merchantkeyevent",
    "merchants_productevent",
    "merchants_merchantcurrencyevent",
    "merchants_merchantproductevent",
    "merchants_platformkeyevent",
    "channels_channelevent",
    "channels_bankcodeevent",
    "payout_denylistedaccountevent",
]

FUNCTIONS = """
CREATE OR REPLACE FUNCTION append_only_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'append-only: % of a row of % is refused', TG_OP, TG_TABLE_NAME;
END $$;

CREATE OR REPLACE FUNCTION append_only_context_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- pghistory's upsert of a nested context adds keys; what a context already says never changes.
    IF TG_OP = 'UPDATE' AND NEW.id = OLD.id AND NEW.created_at = OLD.created_at
            AND NEW.metadata @> OLD.metadata THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'append-only: % of a row of % is refused', TG_OP, TG_TABLE_NAME;
END $$;
"""


def guard(table: str, function: str) -> str:
    return (f"CREATE OR REPLACE TRIGGER append_only_guard BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION {function}();")


class Migration(migrations.Migration):

    dependencies = [
        ("common", "0004_merge_four_eyes_and_settings_history"),
        ("currencies", "0002_settings_history"),
        ("merchants", "0004_dual_approval_threshold_history"),
        ("channels", "0003_channel_credentials_upstream_payin"),
        ("payout", "0004_merge_four_eyes_and_settings_history"),
        ("pghistory", "0007_auto_20250421_0444"),
    ]

    operations = [
        migrations.RunSQL(
            FUNCTIONS + "\n".join([*(guard(table, "append_only_refuse") for table in EVENT_TABLES),
                                   guard("pghistory_context", "append_only_context_guard")]),
            reverse_sql="\n".join([*(f"DROP TRIGGER IF EXISTS append_only_guard ON {table};"
                                     for table in [*EVENT_TABLES, "pghistory_context"]),
                                   "DROP FUNCTION IF EXISTS append_only_refuse();",
                                   "DROP FUNCTION IF EXISTS append_only_context_guard();"]),
        ),
    ]
