"""Indexes that pay/create no longer writes (docs/performance.md, "Measured changes"): the plain expire_at index (no
query reads it: the expiry scans and the stranded-order counts read collection_open_by_expiry, reconciliation its listed
platform_order_nos), and paid_at and status indexes that hold no CREATED order (the admin's filters on paid and finished
orders; CREATED ones are collection_open_by_expiry's). The new ones are built CONCURRENTLY before the old ones go, so no
write waits and the admin's filters always have an index."""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('collection', '0005_orders_by_merchant_created'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='collectionorder',
            index=models.Index(condition=models.Q(('status', 'CREATED'), _negated=True), fields=['status'],
                               name='collection_finished_status_idx'),
        ),
        AddIndexConcurrently(
            model_name='collectionorder',
            index=models.Index(condition=models.Q(('paid_at__isnull', False)), fields=['paid_at'],
                               name='collection_paid_at_idx'),
        ),
        RemoveIndexConcurrently(
            model_name='collectionorder',
            name='collection_status_idx',
        ),
        migrations.AlterField(
            model_name='collectionorder',
            name='expire_at',
            field=models.DateTimeField(),
        ),
        migrations.AlterField(
            model_name='collectionorder',
            name='paid_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
