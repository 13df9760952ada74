"""The flush after a `transaction=True` test (tests/support/flush.py): every table emptied as `manage.py flush` does;
post_migrate's rows (content types, permissions, the staff roles) kept when unchanged, written again when not."""

import pytest
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection

from apps.common.models import ReferenceGeneration
from tests.support.flush import flush

pytestmark = pytest.mark.django_db(transaction=True)


def post_migrate_rows():
    return (sorted(ContentType.objects.values_list("app_label", "model")),
            sorted(Permission.objects.values_list("content_type__app_label", "codename")),
            sorted((group.name, sorted(group.permissions.values_list("codename", flat=True)))
                   for group in Group.objects.all()))


def tables_with_rows():
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(f"SELECT '{table}' WHERE EXISTS (SELECT 1 FROM {table})" for table in tables))
        return {row[0] for row in cursor.fetchall()}


def test_an_unchanged_flush_keeps_post_migrates_rows_and_empties_everything_else(bootstrapped, merchant):
    flush("default")  # a full one or not: from here post_migrate's rows are the remembered ones
    expected, after_full = post_migrate_rows(), tables_with_rows()
    assert Group.objects.filter(name="Risk reviewer").exists() and Permission.objects.count() > 200

    from django.core.management import call_command

    call_command("bootstrap", stdout=open("/dev/null", "w"))  # rows in most tables again, post_migrate's untouched
    assert len(tables_with_rows()) > len(after_full) + 10
    generation = ReferenceGeneration.objects.get(pk=1).value
    assert flush("default") is True  # kept: post_migrate not sent
    assert tables_with_rows() == after_full  # every other table empty, as after the full flush
    assert post_migrate_rows() == expected
    # Written back with a value never handed out before, as the reference tables' TRUNCATE triggers write it.
    assert ReferenceGeneration.objects.get(pk=1).value > generation


@pytest.mark.parametrize("change", ["a role", "a role's permission", "a permission", "a content type"])
def test_a_changed_role_permission_or_content_type_makes_it_a_full_flush(change):
    flush("default")
    expected = post_migrate_rows()
    reviewer = Group.objects.get(name="Risk reviewer")
    if change == "a role":
        Group.objects.create(name="Made by a test")
    elif change == "a role's permission":
        reviewer.permissions.remove(reviewer.permissions.first())
    elif change == "a permission":
        Permission.objects.filter(codename="view_payout").delete()
    else:
        ContentType.objects.create(app_label="made", model="bytest")
    assert post_migrate_rows() != expected
    assert flush("default") is False  # the full flush, post_migrate sent
    assert post_migrate_rows() == expected


def test_a_write_in_flight_in_another_session_ends_before_the_flush_and_is_emptied_too():
    """As a TRUNCATE would: the flush waits for the writer's transaction (its tables' locks), then empties what it
    wrote. A delete that did not wait would not see a row committed after it began, and leave it to the next test."""
    import threading

    from django.contrib.auth.models import User
    from django.db import connections, transaction

    from tests.support.wait import wait_until

    flush("default")  # from here the kept path
    written, commit, outcome = threading.Event(), threading.Event(), {}

    def writer():
        try:
            with transaction.atomic():
                User.objects.create(username="in-flight")
                written.set()
                commit.wait(20)
        finally:
            connections.close_all()

    def flusher():
        try:
            outcome["kept"] = flush("default")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer), threading.Thread(target=flusher)]
    threads[0].start()
    assert written.wait(20)
    threads[1].start()
    try:
        with connection.cursor() as cursor:
            def flush_waits_on_a_lock():
                cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND database = "
                               "(SELECT oid FROM pg_database WHERE datname = current_database()))")
                return cursor.fetchone()[0]

            wait_until(flush_waits_on_a_lock, timeout=20, what="the flush waiting for the writer's transaction")
    finally:
        commit.set()
        for thread in threads:
            thread.join(30)
    assert outcome == {"kept": True}
    assert not User.objects.filter(username="in-flight").exists()
