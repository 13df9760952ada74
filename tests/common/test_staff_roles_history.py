"""Staff accounts and roles in the settings trail (apps.common.models.UserEvent, UserGroupEvent, ...): who made whom
staff or superuser, (de)activated an account, granted or revoked a role or a permission, recorded by database
triggers with who and when, append-only, and never the password hash."""

import io
import json

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction

from apps.common.history import event_changes, event_who, grant_words
from apps.common.models import GroupPermissionEvent, UserEvent, UserGroupEvent, UserPermissionEvent
from tests.support.staff import admin_login

pytestmark = pytest.mark.django_db

STAFF_EVENT_TABLES = ["common_userevent", "common_usergroupevent", "common_userpermissionevent",
                      "common_grouppermissionevent"]


@pytest.fixture
def alice_client(client):
    admin_login(client, User.objects.create_superuser("alice", password="pw-for-tests-1"))
    return client


@pytest.fixture
def rita(db):
    return User.objects.create_user("rita", password="a long password 123", is_staff=True)


def user_form(user: User, **changes) -> dict:
    """The admin's change form of `user` as the browser posts it, with `changes`."""
    form = {"username": user.username, "first_name": user.first_name, "last_name": user.last_name,
            "email": user.email, "is_active": user.is_active, "is_staff": user.is_staff,
            "is_superuser": user.is_superuser, "groups": [g.pk for g in user.groups.all()],
            "user_permissions": [p.pk for p in user.user_permissions.all()],
            "date_joined_0": f"{user.date_joined:%Y-%m-%d}", "date_joined_1": f"{user.date_joined:%H:%M:%S}",
            "last_login_0": "", "last_login_1": "", **changes}
    return {name: ("on" if value is True else value) for name, value in form.items() if value is not False}


def change_user(client, user: User, **changes):
    response = client.post(f"/admin/auth/user/{user.pk}/change/", user_form(user, **changes))
    assert response.status_code == 302, response.content.decode()[:2000]


def test_granting_a_role_in_the_admin_records_who_granted_what_to_whom(alice_client, rita):
    reviewers = Group.objects.get(name="Risk reviewer")
    change_user(alice_client, rita, groups=[reviewers.pk], is_superuser=True)

    [granted] = UserGroupEvent.objects.filter(user_id=rita.pk)
    assert (granted.pgh_label, granted.group_id, event_who(granted)) == ("grant", reviewers.pk, "alice")
    assert grant_words(granted) == "rita: groups + Risk reviewer"
    made_superuser = UserEvent.objects.filter(pgh_obj_id=rita.pk).order_by("pgh_id").last()
    assert event_who(made_superuser) == "alice"
    assert event_changes(made_superuser) == {"is_superuser": (False, True)}

    page = alice_client.get("/admin/common/usergroupevent/").content.decode()
    assert "rita: groups + Risk reviewer" in page and "alice" in page and "granted" in page
    page = alice_client.get(f"/admin/common/userevent/?pgh_obj={rita.pk}").content.decode()
    assert "user rita" in page and "<b>is_superuser</b>: False \u2192 True" in page

    user_page = alice_client.get(f"/admin/auth/user/{rita.pk}/change/").content.decode()
    assert f'href="/admin/common/usergroupevent/?user={rita.pk}"' in user_page  # her roles' history
    alice = User.objects.get(username="alice")
    alice.groups.add(reviewers)
    hers = alice_client.get(f"/admin/common/usergroupevent/?user={rita.pk}").content.decode()
    assert "rita: groups + Risk reviewer" in hers and "alice: groups" not in hers


def test_revoking_a_role_and_deactivating_in_the_admin_are_recorded_too(alice_client, rita):
    operations = Group.objects.get(name="Payout operations")
    rita.groups.add(operations)
    change_user(alice_client, rita, groups=[], is_active=False)

    revoked = UserGroupEvent.objects.filter(user_id=rita.pk).order_by("pgh_id").last()
    assert (revoked.pgh_label, revoked.group_id, event_who(revoked)) == ("revoke", operations.pk, "alice")
    assert grant_words(revoked) == "rita: groups \u2212 Payout operations"
    deactivated = UserEvent.objects.filter(pgh_obj_id=rita.pk).order_by("pgh_id").last()
    assert (event_who(deactivated), event_changes(deactivated)) == ("alice", {"is_active": (True, False)})
    page = alice_client.get("/admin/common/usergroupevent/").content.decode()
    assert "rita: groups \u2212 Payout operations" in page and "revoked" in page


def test_direct_permissions_and_a_roles_permissions_are_recorded(alice_client, rita):
    review = Permission.objects.get(content_type__app_label="payout", codename="review_payout")
    change_user(alice_client, rita, user_permissions=[review.pk])
    [granted] = UserPermissionEvent.objects.filter(user_id=rita.pk)
    assert (event_who(granted), grant_words(granted)) == ("alice", "rita: permissions + payout.review_payout")

    operations = Group.objects.get(name="Payout operations")
    response = alice_client.post(f"/admin/auth/group/{operations.pk}/change/", {
        "name": operations.name, "permissions": [*operations.permissions.values_list("pk", flat=True), review.pk]})
    assert response.status_code == 302, response.content.decode()[:2000]
    granted = GroupPermissionEvent.objects.filter(group_id=operations.pk).order_by("pgh_id").last()
    assert (event_who(granted), grant_words(granted)) == ("alice",
                                                          "Payout operations: permissions + payout.review_payout")
    assert "Payout operations: permissions + payout.review_payout" in alice_client.get(
        "/admin/common/grouppermissionevent/").content.decode()


def test_create_staff_records_its_operator_for_the_user_and_the_role(db):
    call_command("create_staff", "rosa", "--role", "risk-reviewer", "--password-stdin", "--operator", "carol",
                 stdin=io.StringIO("correct horse battery 42\n"), stdout=io.StringIO())
    rosa = User.objects.get(username="rosa")
    [created] = UserEvent.objects.filter(pgh_obj_id=rosa.pk)
    [granted] = UserGroupEvent.objects.filter(user_id=rosa.pk)
    assert created.pgh_label == "insert" and (created.is_staff, created.is_superuser) == (True, False)
    assert event_who(created) == event_who(granted) == "carol (manage.py create_staff)"
    assert grant_words(granted) == "rosa: groups + Risk reviewer"


def test_the_staff_event_tables_refuse_update_and_delete_in_the_database(rita):
    rita.groups.add(Group.objects.get(name="Risk reviewer"))
    rita.user_permissions.add(Permission.objects.get(content_type__app_label="payout", codename="review_payout"))
    Group.objects.get(name="Payout operations").permissions.add(
        Permission.objects.get(content_type__app_label="payout", codename="review_payout"))
    for table in STAFF_EVENT_TABLES:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {table}")
            assert cursor.fetchone()[0] >= 1, table
        for sql in [f"UPDATE {table} SET pgh_label = 'forged'", f"DELETE FROM {table}"]:
            with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
                with connection.cursor() as cursor:  # even with pgtrigger's own triggers switched off
                    cursor.execute("SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
                                   [table])
                    names = "{" + ",".join(row[0] for row in cursor.fetchall()) + "}"
                    cursor.execute("SELECT set_config('pgtrigger.ignore', %s, true)", [names])
                    cursor.execute(sql)
    assert UserGroupEvent.objects.filter(user_id=rita.pk, pgh_label="grant").exists()


def test_a_password_reset_is_recorded_without_the_hash_and_a_sign_in_writes_nothing(alice_client, rita):
    from django.contrib.auth.models import update_last_login

    change_user(alice_client, rita, first_name="Rita")
    response = alice_client.post(f"/admin/auth/user/{rita.pk}/password/", {
        "password1": "another long password 456", "password2": "another long password 456"})
    assert response.status_code == 302, response.content.decode()[:2000]
    reset = UserEvent.objects.filter(pgh_obj_id=rita.pk).order_by("pgh_id").last()
    assert (reset.pgh_label, event_who(reset)) == ("password_set", "alice")
    assert event_changes(reset) == {"password": ("(not kept)", "(changed; not kept)")}
    before = UserEvent.objects.count()
    rita.refresh_from_db()
    update_last_login(None, rita)  # every sign-in: noise, not a setting
    assert UserEvent.objects.count() == before
    renamed = UserEvent.objects.filter(pgh_obj_id=rita.pk, pgh_label="update").order_by("pgh_id").last()
    assert event_changes(renamed) == {"first_name": ("", "Rita")}  # the password event is no "old" value

    rita.refresh_from_db()
    hashes = {rita.password, User.objects.get(username="alice").password}
    columns = {f.column for f in UserEvent._meta.concrete_fields}
    assert "password" not in columns and "last_login" not in columns
    with connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(e)::text FROM common_userevent e")
        rows = [row[0] for row in cursor.fetchall()]
    assert rows and not any(h in row or h.split("$")[-1] in row for h in hashes for row in rows)
    for url in ["/admin/common/userevent/", f"/admin/common/userevent/{reset.pk}/change/"]:
        page = alice_client.get(url).content.decode()
        assert "password changed" in page and not any(h.split("$")[-1] in page for h in hashes), url
    assert json.dumps(event_changes(reset), default=str).find("pbkdf2") == -1
