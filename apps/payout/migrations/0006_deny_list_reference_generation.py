"""The deny list is reference data (docs/performance.md, "Reference data cache"): payout/create reads it from the
per-process cache, so every write of it bumps the reference generation."""

from django.db import migrations

from apps.common.refcache import reference_table_trigger


class Migration(migrations.Migration):
    dependencies = [
        ("common", "0001_initial"),
        ("payout", "0005_payout_hold_set_after_claim"),
    ]

    operations = [reference_table_trigger("payout_denylistedaccount")]
