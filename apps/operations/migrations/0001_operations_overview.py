"""The operations overview's proxy model, moved here from apps.common: its content type row is renamed, so its
view permission, and every group and person holding it, stay as they were."""

from django.db import migrations


def content_type_rename(apps, *, source, target):
    content_type_model = apps.get_model("contenttypes", "ContentType")
    content_type_model.objects.filter(app_label=source, model="operationsoverview").update(app_label=target)


def forwards(apps, schema_editor):
    content_type_rename(apps, source="common", target="operations")


def backwards(apps, schema_editor):
    content_type_rename(apps, source="operations", target="common")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("common", "0012_overview_and_adjust_balance_moved"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.CreateModel(
            name="OperationsOverview",
            fields=[],
            options={"verbose_name": "operations overview", "verbose_name_plural": "Operations overview",
                     "proxy": True, "indexes": [], "constraints": []},
            bases=("common.heartbeat",),
        ),
        migrations.RunPython(forwards, backwards),
    ]
