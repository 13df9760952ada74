"""The database itself enforces the ledger's rules on PostgreSQL (as django-hordak does):

- a deferred constraint trigger rejects, at commit, any posting whose entries do not sum to zero per
  currency, or whose entry currency differs from its account's;
- postings and entries are immutable: UPDATE and DELETE are refused (a correction is a new posting).
SQLite (the embedded development default) relies on the checks in apps.ledger.services.
"""

from django.db import migrations

POSTGRES_UP = """
CREATE OR REPLACE FUNCTION ledger_check_posting_balanced() RETURNS trigger AS $$
DECLARE
    bad record;
BEGIN
    SELECT e.currency_id, SUM(e.amount) AS total INTO bad
      FROM ledger_entry e WHERE e.posting_id = NEW.posting_id
     GROUP BY e.currency_id HAVING SUM(e.amount) <> 0 LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'ledger posting % does not balance in %: legs sum to %', NEW.posting_id, bad.currency_id, bad.total
            USING ERRCODE = 'check_violation';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM ledger_ledgeraccount a WHERE a.id = NEW.account_id AND a.currency_id = NEW.currency_id) THEN
        RAISE EXCEPTION 'ledger entry % is in % but its account is not', NEW.id, NEW.currency_id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE CONSTRAINT TRIGGER ledger_entry_balanced
    AFTER INSERT ON ledger_entry
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION ledger_check_posting_balanced();

CREATE OR REPLACE FUNCTION ledger_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% rows are immutable; post a correction instead', TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation';
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER ledger_entry_immutable BEFORE UPDATE OR DELETE ON ledger_entry
    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER ledger_posting_immutable BEFORE UPDATE OR DELETE ON ledger_posting
    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
"""

POSTGRES_DOWN = """
DROP TRIGGER IF EXISTS ledger_posting_immutable ON ledger_posting;
DROP TRIGGER IF EXISTS ledger_entry_immutable ON ledger_entry;
DROP FUNCTION IF EXISTS ledger_refuse_change();
DROP TRIGGER IF EXISTS ledger_entry_balanced ON ledger_entry;
DROP FUNCTION IF EXISTS ledger_check_posting_balanced();
"""


def _on_postgres(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("ledger", "0001_initial")]

    operations = [migrations.RunPython(_on_postgres(POSTGRES_UP), _on_postgres(POSTGRES_DOWN))]
