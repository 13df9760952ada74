"""Platform accounts are reference data (docs/performance.md, "Reference data cache"): a posting takes them from the
per-process cache, so every write of a platform row bumps the reference generation. Row triggers with a WHEN on the
owner: a merchant account's balance UPDATE (every posting) fires nothing."""

from django.db import migrations

BUMP = "EXECUTE FUNCTION common_reference_generation_bump()"


class Migration(migrations.Migration):
    dependencies = [
        ("common", "0001_initial"),
        ("ledger", "0002_open_holds_index"),
    ]

    operations = [
        migrations.RunSQL(
            f"""
            CREATE TRIGGER ledger_platform_account_reference_generation
                AFTER INSERT OR UPDATE ON ledger_ledgeraccount
                FOR EACH ROW WHEN (NEW.merchant_id IS NULL) {BUMP};
            CREATE TRIGGER ledger_platform_account_reference_generation_delete
                AFTER DELETE ON ledger_ledgeraccount
                FOR EACH ROW WHEN (OLD.merchant_id IS NULL) {BUMP};
            CREATE TRIGGER ledger_ledgeraccount_reference_generation_truncate
                AFTER TRUNCATE ON ledger_ledgeraccount FOR EACH STATEMENT {BUMP};
            """,
            """
            DROP TRIGGER ledger_platform_account_reference_generation ON ledger_ledgeraccount;
            DROP TRIGGER ledger_platform_account_reference_generation_delete ON ledger_ledgeraccount;
            DROP TRIGGER ledger_ledgeraccount_reference_generation_truncate ON ledger_ledgeraccount;
            """,
        ),
    ]
