# The platform key joins the cached reference data (apps.common.refcache): every write to it bumps the generation,
# so a rotation is seen by the next request, task scope or callback attempt (docs/performance.md).

from django.db import migrations

from apps.common.refcache import reference_table_trigger


class Migration(migrations.Migration):

    dependencies = [
        ('merchants', '0004_dual_approval_threshold_history'),
    ]

    operations = [
        reference_table_trigger("merchants_platformkey"),
    ]
