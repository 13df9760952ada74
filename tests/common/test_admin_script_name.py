"""A request's SCRIPT_NAME cannot switch the admin's checks off. A WSGI server takes SCRIPT_NAME from
its environment or, from an address it trusts, from a client's header (gunicorn trusts 127.0.0.1 by default): when
the admin's path was worked out from the first request a worker served, a first request with `SCRIPT_NAME: /zz` made
the second-factor check and the settings trail's who skip every later admin request of that worker. Here with Django's
test client; over a real gunicorn in tests/config/test_gunicorn.py."""

import pytest
from django.contrib.auth.models import User
from django.core.handlers.wsgi import WSGIHandler
from django.test import RequestFactory
from django.urls import set_script_prefix

from apps.common.history import admin_prefix, event_model_of, event_who
from apps.payout.models import DenyListedAccount
from tests.support.staff import admin_login

# transaction=True: the first request goes through Django's own WSGI handler, which closes the connection after it.
pytestmark = pytest.mark.django_db(transaction=True)


def first_request(path: str, *, script_name: str) -> str:
    """A worker's first request, through Django's WSGI handler as a server hands it over (the test client sets no
    script prefix); the next request sets the prefix back to its own, as the handler does at each request."""
    environ = RequestFactory()._base_environ(PATH_INFO=path, SCRIPT_NAME=script_name, REQUEST_METHOD="GET")
    statuses = []
    response = WSGIHandler()(environ, lambda status, headers: statuses.append(status))
    response.close()
    set_script_prefix("/")
    return statuses[0]


@pytest.fixture(autouse=True)
def _a_fresh_worker():
    """As in a worker that has served nothing yet: the admin path is worked out by the first request."""
    admin_prefix.cache_clear()
    yield
    admin_prefix.cache_clear()


def test_a_first_request_with_a_script_name_leaves_the_second_factor_on(client, bootstrapped):
    assert first_request("/currencies", script_name="/zz") == "200 OK"
    client.force_login(User.objects.create_superuser("mallory", password="pw"))  # no verified second factor
    for page in ("/admin/", "/admin/payout/payoutreview/", "/admin/merchants/merchant/"):
        response = client.get(page)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), page
    # A request under the prefix (the path with it: PATH_INFO is the rest) is refused all the same.
    response = client.get("/admin/", SCRIPT_NAME="/zz")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_a_first_request_with_a_script_name_leaves_the_settings_trail_naming_who(client, bootstrapped):
    first_request("/currencies", script_name="/zz")
    admin_login(client, User.objects.create_superuser("root", password="pw"))
    response = client.post("/admin/payout/denylistedaccount/add/", {
        "payee_account": "0099990000", "currency": "PHP", "reason": "mule account", "is_active": "on"})
    assert response.status_code == 302
    entry = DenyListedAccount.objects.get(payee_account="0099990000")
    [added] = event_model_of(DenyListedAccount).objects.filter(pgh_obj_id=entry.pk).select_related("pgh_context")
    assert event_who(added) == "root"


def test_the_admin_path_is_the_same_whatever_script_name_the_first_request_had(client):
    first_request("/healthz", script_name="/some/prefix")
    assert admin_prefix() == "/admin/"
