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


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the block ends: nothing listens there


def test_attempt_errors_read_as_words_without_internal_class_names(admin_client, hooked_merchant, enqueue,
                                                                   settings):
    settings.CALLBACK_RETRY_DELAYS_SECONDS = []
    hooked_merchant.collection_callback_url = f"http://127.0.0.1:{_closed_port()}/cb"
    hooked_merchant.save(update_fields=["collection_callback_url"])
    event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    error = event.attempts.get().error
    assert "connection refused" in error.lower(), error
    assert "Pool" not in error and "object at 0x" not in error and "Errno" not in error, error
    page = admin_client.get(f"{CHANGELIST}{event.pk}/change/").content.decode()
    assert "_PinnedHTTPPool" not in page


def test_event_page_is_titled_view_and_attempts_do_not_read_attempt_n_of_m(admin_client, dead_event):
    page = admin_client.get(f"{CHANGELIST}{dead_event.pk}/change/").content.decode()
    assert "| View callback event |" in page and "Change callback event" not in page
    attempt = dead_event.attempts.get()
    assert str(attempt) == f"event {dead_event.pk}, attempt 1"
    assert f"attempt 1 of {dead_event.pk}" not in page


def test_the_event_page_names_the_merchant_without_a_link_that_would_answer_403(client, dead_event):
    admin_login(client, staff("view_callbackevent", "view_callbackattempt"))
    page = client.get(f"{CHANGELIST}{dead_event.pk}/change/").content.decode()
    assert dead_event.merchant.merchant_no in page
    assert f"/admin/merchants/merchant/{dead_event.merchant_id}/" not in page


def test_urllib3_errors_that_carry_our_pool_and_connection_objects_are_told_in_words():
    import requests
    from urllib3.exceptions import NewConnectionError, ProtocolError, ReadTimeoutError

    from apps.callbacks.transport import _HTTPPool, _WatchedHTTPConnection, _describe

    pool = _HTTPPool("127.0.0.1", 9)
    conn = _WatchedHTTPConnection("127.0.0.1", 9)
    cases = [
        requests.ConnectionError(ReadTimeoutError(pool, "/cb", "Read timed out.")),
        requests.ConnectionError(NewConnectionError(conn, "Failed to establish a new connection: [Errno 111] "
                                                          "Connection refused")),
        requests.ConnectionError(ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer"))),
    ]
    texts = [_describe(exc, 5) for exc in cases]
    assert texts == ["connection failed: read timed out.", "connection failed: connection refused",
                     "connection failed: connection reset by peer"], texts
    for text in texts:
        assert "Pool" not in text and "_Watched" not in text and "0x" not in text and "Errno" not in text
