"""Sentry: nothing without SENTRY_DSN; with one, a view's exception and a Celery task's reach that
DSN's server, without the request body or the task's local variables."""

import gzip
import json
import os
import subprocess
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import sentry_sdk
from django.conf import settings

from config.sentry import sentry_init


def test_without_a_dsn_nothing_is_initialised():
    assert not os.environ.get("SENTRY_DSN")
    assert settings.SENTRY_ENABLED is False
    assert sentry_init(dsn="") is False
    assert not sentry_sdk.get_client().is_active()


class Envelopes(BaseHTTPRequestHandler):
    received: list[bytes] = []

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        encoding = self.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        self.received.append(body)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


# Runs in a child process, so the SDK (global state) never touches this test session.
CHILD = """
import django, sentry_sdk
django.setup()
from django.test import Client
def broken(*args, **kwargs):
    raise RuntimeError("boom-for-sentry")
import config.views
config.views.render = broken
client = Client(raise_request_exception=False)
response = client.post("/", data="payee_account=0099887766554433", content_type="application/x-www-form-urlencoded")
assert response.status_code in (405, 500), response.status_code
assert client.get("/").status_code == 500
sentry_sdk.flush(timeout=10)
"""


def sent_to_sentry(child: str) -> bytes:
    """Runs `child` in a process whose SENTRY_DSN is a local envelope server; what that server received."""
    Envelopes.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Envelopes)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test",
               "SENTRY_DSN": f"http://publickey@127.0.0.1:{server.server_port}/1"}
        done = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=60,
                              cwd=settings.BASE_DIR)
        assert done.returncode == 0, done.stderr[-2000:]
    finally:
        server.shutdown()
    return b"\n".join(Envelopes.received)


def test_with_a_dsn_a_view_exception_is_sent_there_without_the_body():
    sent = sent_to_sentry(CHILD)
    assert b"boom-for-sentry" in sent
    assert b"0099887766554433" not in sent  # no request body
    events = [json.loads(line) for line in sent.splitlines() if line.startswith(b"{") and b'"exception"' in line]
    assert events and all("user" not in event or not event["user"].get("ip_address") for event in events)


# A task run through Celery's tracer (apply: the worker's code path, in this process), failing in its service.
CHILD_TASK = """
import django, sentry_sdk
django.setup()
from apps.payout import services, tasks
def broken(*, payout_id):
    payee_account = "0099887766554433"  # a local the report must not carry
    raise RuntimeError(f"boom-in-a-task {payout_id}")
services.payout_submit = broken
result = tasks.submit_payout.apply(args=[424242])
assert result.failed(), result.state
sentry_sdk.flush(timeout=10)
"""


def test_with_a_dsn_a_celery_tasks_exception_is_sent_there_without_its_locals():
    sent = sent_to_sentry(CHILD_TASK)
    assert b"boom-in-a-task 424242" in sent
    assert b"apps.payout.tasks.submit_payout" in sent  # named by its task
    assert b"0099887766554433" not in sent  # include_local_variables=False
