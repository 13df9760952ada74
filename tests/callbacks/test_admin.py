"""Admin: events filterable and searchable, attempts read-only with the body sent, the audited Re-send action."""

import pytest
from django.contrib.auth.models import Permission, User

from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.callbacks.deliver import callback_deliver
from apps.common.models import AuditLog
from tests.support.receiver import Reply
from tests.support.staff import admin_login

CHANGELIST = "/admin/callbacks/callbackevent/"


def staff(*codenames: str) -> User:
    user = User.objects.create_user("ops", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="callbacks", codename__in=codenames))
    return user


@pytest.fixture
def dead_event(hooked_merchant, callback_receiver, enqueue, settings):
    settings.CALLBACK_RETRY_DELAYS_SECONDS = []  # one failed attempt is the last one
    callback_receiver.script(Reply(500, "boom"))
    event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    assert event.status == CallbackEvent.Status.DEAD
    return event


def test_the_changelist_filters_by_merchant_type_and_status_and_searches_order_numbers(admin_client, dead_event):
    merchant_id = dead_event.merchant_id
    for query in ("", "?status__exact=dead", "?type__exact=collection.success", f"?merchant__id__exact={merchant_id}",
                  f"?q={dead_event.platform_order_no}"):
        page = admin_client.get(CHANGELIST + query)
        assert page.status_code == 200 and dead_event.platform_order_no in page.content.decode(), query
    assert dead_event.platform_order_no not in admin_client.get(CHANGELIST + "?status__exact=delivered").content.decode()
    assert dead_event.platform_order_no not in admin_client.get(CHANGELIST + "?q=nope").content.decode()


def test_the_event_and_attempt_pages_show_what_was_sent_read_only(admin_client, dead_event):
    attempt = dead_event.attempts.get()
    page = admin_client.get(f"{CHANGELIST}{dead_event.pk}/change/").content.decode()
    assert "boom" in page and "HTTP 500" in page and attempt.request_body["sign"][:20] in page
    assert 'name="_save"' not in page
    page = admin_client.get(f"/admin/callbacks/callbackattempt/{attempt.pk}/change/").content.decode()
    assert attempt.request_body["nonce"] in page and "PRIVATE KEY" not in page
    assert admin_client.get(f"{CHANGELIST}add/").status_code == 403
    assert admin_client.post(f"{CHANGELIST}{dead_event.pk}/delete/", {"post": "yes"}).status_code == 403


def test_resend_action_makes_one_more_attempt_after_commit_and_is_audited(client, dead_event, callback_receiver,
                                                                        django_capture_on_commit_callbacks,
                                                                        monkeypatch):
    from apps.callbacks import tasks

    queued = []
    monkeypatch.setattr(tasks.deliver_callback, "delay", lambda event_id: queued.append(event_id))
    user = staff("view_callbackevent", "change_callbackevent")
    admin_login(client, user)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(CHANGELIST, {"action": "resend", "_selected_action": [dead_event.pk]})
    assert response.status_code == 302 and queued == [dead_event.pk]
    event = CallbackEvent.objects.get(pk=dead_event.pk)
    assert event.status == CallbackEvent.Status.PENDING and event.attempts_count == 1  # nothing reset
    event = callback_deliver(event_id=event.pk)
    assert event.status == CallbackEvent.Status.DELIVERED and event.attempts_count == 2
    assert CallbackAttempt.objects.filter(event=event, manual=True, success=True).count() == 1
    assert AuditLog.objects.filter(action="callback.resend", object_id=str(event.pk), actor=user).exists()


def test_resend_needs_the_change_permission(client, dead_event):
    admin_login(client, staff("view_callbackevent"))
    page = client.get(CHANGELIST).content.decode()
    assert dead_event.platform_order_no in page and 'value="resend"' not in page
    client.post(CHANGELIST, {"action": "resend", "_selected_action": [dead_event.pk]})
    assert CallbackEvent.objects.get(pk=dead_event.pk).status == CallbackEvent.Status.DEAD
    assert not AuditLog.objects.filter(action="callback.resend").exists()
