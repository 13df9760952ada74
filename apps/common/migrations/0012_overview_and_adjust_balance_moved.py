"""The operations overview's proxy moves to apps.operations (operations 0001 renames its content type) and the
balance adjustment's permission to apps.ledger, the apps whose pages they serve. The permission row moves with every
group and person holding it; where an earlier migration already made the ledger's (the staff groups are ensured by
payout's migrations from the state of their time), the holders are carried over and the old row goes."""

from django.db import migrations

CODENAME = "adjust_balance"


def permission_move(apps, *, source, target):
    content_type_model = apps.get_model("contenttypes", "ContentType")
    permission_model = apps.get_model("auth", "Permission")
    old = permission_model.objects.filter(content_type__app_label=source[0], content_type__model=source[1],
                                          codename=CODENAME).first()
    if old is None:
        return  # a new database: the permission is made after the migrations, already in its place
    new = permission_model.objects.filter(content_type__app_label=target[0], content_type__model=target[1],
                                          codename=CODENAME).first()
    if new is None:
        old.content_type, _ = content_type_model.objects.get_or_create(app_label=target[0], model=target[1])
        old.save(update_fields=["content_type"])
        return
    for group in apps.get_model("auth", "Group").objects.filter(permissions=old):
        group.permissions.add(new)
    for user in apps.get_model("auth", "User").objects.filter(user_permissions=old):
        user.user_permissions.add(new)
    old.delete()


def forwards(apps, schema_editor):
    permission_move(apps, source=("common", "staffrequest"), target=("ledger", "posting"))


def backwards(apps, schema_editor):
    permission_move(apps, source=("ledger", "posting"), target=("common", "staffrequest"))


class Migration(migrations.Migration):

    dependencies = [
        ("common", "0011_staff_request_summary_whole"),
        ("ledger", "0006_adjust_balance_permission"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        migrations.DeleteModel(name="OperationsOverview"),
        migrations.AlterModelOptions(name="staffrequest", options={"ordering": ["-created_at", "-id"]}),
        migrations.RunPython(forwards, backwards),
    ]
