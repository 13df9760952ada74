"""The platform under a real gunicorn: a SCRIPT_NAME header cannot switch the admin's second factor off,
the platform's gunicorn settings (config/gunicorn.py) believe no such header from anyone, and a body too large is
answered with `Connection: close`, so a keep-alive client's next request works."""

import http.client
import os
import re
import socket
import sys

import pytest
import requests
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from apps.common.history import event_model_of, event_who
from apps.payout.models import DenyListedAccount
from tests.faults.processes import Processes, database_url, free_port, wait_until
from tests.support.staff import admin_login

pytestmark = pytest.mark.django_db(transaction=True)

PLATFORM_CONFIG = ("-c", "config/gunicorn.py")  # as the Dockerfile and docker-compose.yml run it


@pytest.fixture
def procs(transactional_db, tmp_path):
    processes = Processes(tmp_path)
    yield processes
    processes.stop_all()


def gunicorn(procs: Processes, *args: str) -> str:
    """A gunicorn serving the platform on this test's database; returns its base URL once it listens. No request is
    sent: the test's first request is the worker's first (it waits for the worker to boot)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"CELERY_BROKER_URL", "PYTHONPATH"}}
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings.test", "DATABASE_URL": database_url(),
                "PYTHONUNBUFFERED": "1"})
    web = procs.start("web", [sys.executable, "-m", "gunicorn", "config.wsgi:application",
                              "--bind", f"127.0.0.1:{port}", "--error-logfile", "-", *args], env)
    base = f"http://127.0.0.1:{port}"

    def listens():
        assert web.alive(), web.tail()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    wait_until(listens, timeout=30, interval=0.2, what="gunicorn listening")
    return base


def session_cookie(user, *, verified: bool) -> dict:
    """The cookie of a session of `user` in the database gunicorn reads, with or without a verified second factor."""
    client = Client()
    if verified:
        admin_login(client, user)
    else:
        client.force_login(user)
    return {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}


def test_a_script_name_header_from_a_trusted_address_leaves_the_second_factor_on(procs, bootstrapped):
    # gunicorn's own settings (no config/gunicorn.py): it believes SCRIPT_NAME from 127.0.0.1, this test's address.
    base = gunicorn(procs, "--workers", "1")
    first = requests.get(f"{base}/zz/currencies", headers={"SCRIPT_NAME": "/zz"}, timeout=30)
    assert first.status_code == 200  # the header was believed: the worker's first request ran under /zz

    unverified = session_cookie(User.objects.create_superuser("mallory", password="pw"), verified=False)
    for page in ("/admin/", "/admin/payout/payoutreview/"):
        response = requests.get(f"{base}{page}", cookies=unverified, allow_redirects=False, timeout=10)
        assert response.status_code == 302 and "/admin/login/" in response.headers["Location"], page

    # A settings edit in that worker is recorded with who made it.
    staff = requests.Session()
    staff.cookies.update(session_cookie(User.objects.create_superuser("root", password="pw"), verified=True))
    form = staff.get(f"{base}/admin/payout/denylistedaccount/add/", timeout=10)
    assert form.status_code == 200
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    added = staff.post(f"{base}/admin/payout/denylistedaccount/add/", allow_redirects=False, timeout=10,
                       data={"csrfmiddlewaretoken": token, "payee_account": "0099990000", "currency": "PHP",
                             "reason": "mule account", "is_active": "on"},
                       headers={"Referer": f"{base}/admin/payout/denylistedaccount/add/"})
    assert added.status_code == 302, added.text[:500]
    entry = DenyListedAccount.objects.get(payee_account="0099990000")
    [event] = event_model_of(DenyListedAccount).objects.filter(pgh_obj_id=entry.pk).select_related("pgh_context")
    assert event_who(event) == "root"


def test_the_platform_gunicorn_believes_no_script_name_header(procs, bootstrapped):
    base = gunicorn(procs, *PLATFORM_CONFIG, "--workers", "1")
    # Dropped: the path is routed as sent, whatever the header says.
    assert requests.get(f"{base}/currencies", headers={"SCRIPT_NAME": "/zz"}, timeout=30).status_code == 200
    assert requests.get(f"{base}/zz/currencies", headers={"SCRIPT_NAME": "/zz"}, timeout=10).status_code == 404
    unverified = session_cookie(User.objects.create_superuser("mallory", password="pw"), verified=False)
    response = requests.get(f"{base}/admin/", cookies=unverified, allow_redirects=False, timeout=10)
    assert response.status_code == 302 and response.headers["Location"].startswith("/admin/login/")


def test_a_body_too_large_is_answered_with_connection_close_and_the_next_request_works(procs, bootstrapped):
    # Threads: gunicorn keeps connections alive (its sync worker closes each one anyway).
    base = gunicorn(procs, *PLATFORM_CONFIG, "--workers", "1", "--threads", "4")
    port = int(base.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/currencies")
    response = connection.getresponse()
    response.read()
    assert response.status == 200 and not response.will_close  # a keep-alive connection
    sock = connection.sock.dup()  # http.client closes its own when told the connection ends

    body = b'{"pad": "' + b"x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1) + b'"}'
    connection.request("POST", "/openapi/v1/payout/create", body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    assert (response.status, response.getheader("Connection")) == (400, "close")
    assert b"too large" in response.read()
    sock.settimeout(10)
    try:
        assert sock.recv(1) == b""  # the server ended the connection
    except ConnectionResetError:
        pass  # ended with the unread body still queued: a reset, after the answer was read
    finally:
        sock.close()

    # The client, told so, opens a new connection for its next request (http.client does), which works.
    connection.request("GET", "/currencies")
    response = connection.getresponse()
    assert response.status == 200 and b"PHP" in response.read()
    connection.close()


def test_a_body_within_the_limit_keeps_the_connection(procs, bootstrapped):
    base = gunicorn(procs, *PLATFORM_CONFIG, "--workers", "1", "--threads", "4")
    connection = http.client.HTTPConnection("127.0.0.1", int(base.rsplit(":", 1)[1]), timeout=30)
    connection.request("POST", "/openapi/v1/payout/create", body=b"{}", headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    response.read()
    assert response.status != 500 and not response.will_close
    sock = connection.sock
    connection.request("GET", "/currencies")
    assert connection.getresponse().status == 200 and connection.sock is sock  # the same connection
    connection.close()
