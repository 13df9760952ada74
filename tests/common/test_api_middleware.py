"""The signed API runs without Django's browser middleware (config/middleware.py): a merchant's request is
authenticated by its signature alone, so a session cookie sent along (a staff member trying the API from the browser
that is signed in to the admin) neither reaches the session table nor comes back refreshed, and the browser pages
keep their sessions, CSRF and messages."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.helpers import assert_ok, signed_post

pytestmark = pytest.mark.django_db


def test_a_session_cookie_on_a_signed_request_reads_and_writes_no_session(client, merchant):
    client.force_login(get_user_model().objects.create_user("ada", password="pw", is_staff=True))
    with CaptureQueriesContext(connection) as queries:
        data = assert_ok(signed_post(client, merchant, "/openapi/v1/balance", {"currency": "PHP"}))
    assert data["currency"] == "PHP"
    assert not [q["sql"] for q in queries.captured_queries if "django_session" in q["sql"]]
    assert client.cookies["sessionid"].value  # still the browser's session
    # Nothing set: no refreshed session cookie (SESSION_SAVE_EVERY_REQUEST applies to pages), no CSRF cookie.
    response = client.post("/openapi/v1/balance", data=merchant.signed_body({"currency": "PHP"}),
                           content_type="application/json")
    assert response.json()["code"] == "0" and not response.cookies


def test_the_pages_keep_their_session_and_csrf(client):
    client.force_login(get_user_model().objects.create_user("ada", password="pw", is_staff=True))
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/portal/")
    assert response.status_code in (200, 302)
    assert [q for q in queries.captured_queries if "django_session" in q["sql"]]
    assert response.cookies["sessionid"].value  # refreshed on every page (SESSION_SAVE_EVERY_REQUEST)
    browser = Client(enforce_csrf_checks=True)
    assert browser.post("/admin/login/", {"username": "ada", "password": "pw"}).status_code == 403  # no CSRF token
