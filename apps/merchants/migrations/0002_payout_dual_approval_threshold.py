"""Four eyes: a second, higher per-currency threshold above which a payout needs two reviewers' approvals.
Existing merchant currencies get ten times their review threshold."""

import django.core.validators
from django.db import migrations, models


def ten_times_review(apps, schema_editor):
    MerchantCurrency = apps.get_model("merchants", "MerchantCurrency")
    MerchantCurrency.objects.update(payout_dual_approval_threshold=models.F("payout_review_threshold") * 10)


class Migration(migrations.Migration):

    dependencies = [("merchants", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="merchantcurrency",
            name="payout_dual_approval_threshold",
            field=models.BigIntegerField(null=True),
        ),
        migrations.RunPython(ten_times_review, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="merchantcurrency",
            name="payout_dual_approval_threshold",
            field=models.BigIntegerField(
                help_text="Payouts at or above this amount (minor units) need approvals by two different reviewers.",
                validators=[django.core.validators.MinValueValidator(1)]),
        ),
        migrations.AddConstraint(
            model_name="merchantcurrency",
            constraint=models.CheckConstraint(
                condition=models.Q(payout_dual_approval_threshold__gte=models.F("payout_review_threshold")),
                name="merchant_currency_dual_threshold_gte_review"),
        ),
    ]
