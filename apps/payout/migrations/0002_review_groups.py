"""The 'Risk reviewer' and 'Payout operations' groups with their payout permissions (issue 5)."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUPS = {
    # Review queue: see it and the orders, approve or reject, keep the deny list.
    "Risk reviewer": ["review_payout", "view_payout", "view_payoutreviewqueue", "view_denylistedaccount",
                      "add_denylistedaccount", "change_denylistedaccount"],
    # Operations: see the orders and reverse a successful one (admin action / reverse_payout).
    "Payout operations": ["reverse_payout", "view_payout"],
}


def create_groups(apps, schema_editor):
    # Permissions are normally created after all migrations ran; make sure they exist now.
    app_config = apps.get_app_config("payout")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, codenames in GROUPS.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*Permission.objects.filter(content_type__app_label="payout", codename__in=codenames))


def remove_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=GROUPS).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("payout", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]
