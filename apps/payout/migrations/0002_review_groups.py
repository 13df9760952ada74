"""The 'Risk reviewer' and 'Payout operations' groups with their payout permissions (issue 5)."""

from django.db import migrations

from apps.payout.permissions import GROUPS, payout_groups_ensure


def create_groups(apps, schema_editor):
    payout_groups_ensure(apps)


def remove_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=GROUPS).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("payout", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]
