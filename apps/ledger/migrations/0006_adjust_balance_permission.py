"""The balance adjustment's permission belongs to the ledger (it was on common.StaffRequest); common 0012 moves the
existing permission row here, with whoever holds it."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("ledger", "0005_ledger_post_hold_id"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="posting",
            options={"ordering": ["id"],
                     "permissions": [("adjust_balance", "Can ask for and approve merchant balance adjustments")]},
        ),
    ]
