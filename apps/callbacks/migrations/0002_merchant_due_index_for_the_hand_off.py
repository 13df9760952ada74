"""The hand-off of a freed bulkhead slot reads a merchant's waiting events from an index keyed by (merchant, status,
next_attempt_at, id), with statistics on (merchant_id, status) so the planner knows a healthy merchant has next to
nothing pending; it replaces the partial (merchant, next_attempt_at) index, beside which the planner kept walking
`callback_event_due` across every merchant's backlog, and the foreign key's own index (the new one starts with the
merchant). docs/callbacks.md, "Indexes".

Built and dropped CONCURRENTLY: the outbox table is large and written by every payment; no write waits for it."""

import django.db.models.deletion
from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('callbacks', '0001_initial'),
        ('merchants', '0001_initial'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='callbackevent',
            index=models.Index(fields=['merchant', 'status', 'next_attempt_at', 'id'],
                               name='callback_event_by_merchant'),
        ),
        RemoveIndexConcurrently(
            model_name='callbackevent',
            name='callback_event_merchant_due',
        ),
        migrations.AlterField(
            model_name='callbackevent',
            name='merchant',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT,
                                    related_name='callback_events', to='merchants.merchant'),
        ),
        # A merchant's share of the events and their status are not independent: a healthy merchant has a long
        # delivered history and next to nothing pending; a dead one has its whole backlog pending. Without these
        # statistics the planner multiplies the two frequencies and expects thousands of a healthy merchant's
        # events pending.
        migrations.RunSQL(
            "CREATE STATISTICS IF NOT EXISTS callback_event_merchant_status (mcv) "
            "ON merchant_id, status FROM callbacks_callbackevent",
            "DROP STATISTICS IF EXISTS callback_event_merchant_status",
        ),
    ]
