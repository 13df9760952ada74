"""A merchant's own orders newest first (the merchant portal's lists, their CSV and today's figures), read from that
merchant's entries however many orders other merchants have. Built CONCURRENTLY: the table is written by every
create; no write waits for it."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('collection', '0004_order_route_reason'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='collectionorder',
            index=models.Index(fields=['merchant', 'created_at', 'id'], name='collection_by_merchant_created'),
        ),
    ]
