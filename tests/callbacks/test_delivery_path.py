"""The whole-attempt deadline holds for every attempt, whatever the merchant's server does (one watchdog thread
per process cuts each attempt at its own deadline); a worker keeps its database connection across tasks only as
the web does (CONN_MAX_AGE, health check)."""

import socket
import ssl
import threading
import time

import pytest
from django.db import connection

from apps.callbacks import transport
from apps.callbacks.transport import post_callback
from config.celery import _close_old_database_connections
from tests.callbacks.conftest import self_signed_certificate
from tests.support.receiver import Reply


def test_one_watchdog_cuts_concurrent_stalled_attempts_each_at_its_own_deadline(callback_receiver, settings):
    settings.CALLBACK_TIMEOUT_SECONDS = 1
    callback_receiver.default = Reply(200, "success", delay=60)
    results = {}

    def attempt(name: str, start_after: float) -> None:
        time.sleep(start_after)  # staggered starts: each attempt has a deadline of its own
        results[name] = post_callback(callback_receiver.url, {"n": name})

    threads = [threading.Thread(target=attempt, args=(f"a{i}", i * 0.5)) for i in range(4)]
    [t.start() for t in threads]
    [t.join(timeout=30) for t in threads]

    assert sorted(results) == ["a0", "a1", "a2", "a3"]
    for result in results.values():
        assert result.error == "timeout after 1 s: the reply did not complete in time"
        # Not before its own deadline (an earlier attempt's deadline does not cut it), and long before the stall ends.
        assert 1000 <= result.duration_ms < 10_000
    assert [t.name for t in threading.enumerate()].count("callback-watchdog") == 1


def test_an_attempt_that_finishes_in_time_is_not_cut_later(callback_receiver, settings):
    settings.CALLBACK_TIMEOUT_SECONDS = 2
    fast = post_callback(callback_receiver.url, {"n": 1})
    time.sleep(2.2)  # past the fast attempt's deadline: the watchdog must not touch what comes next
    callback_receiver.default = Reply(200, "success", delay=0.3)
    slower = post_callback(callback_receiver.url, {"n": 2})
    assert fast.success and slower.success


class DripServer:
    """A raw TCP server that reads the request, then sends `reply` one byte every `interval` seconds."""

    def __init__(self, reply: bytes, interval: float, tls: ssl.SSLContext | None = None):
        self.reply, self.interval, self.tls = reply, interval, tls
        self.stopped = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            conn.recv(65536)
            for i in range(len(self.reply)):
                if self.stopped.wait(self.interval):
                    break
                conn.sendall(self.reply[i:i + 1])
        except OSError:
            pass  # the client gave up
        finally:
            conn.close()

    def stop(self) -> None:
        self.stopped.set()
        self.listener.close()


@pytest.mark.parametrize("scheme,reply", [
    ("http", b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nsuccess"),  # the status line and headers dripped too
    ("http", b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nX-Padding: " + b"x" * 64 + b"\r\n\r\nsuccess"),
    ("https", b"\x16\x03\x03\x00\x40" + b"\x00" * 64),  # a TLS handshake record dripped: cut before TLS is up
])
def test_a_reply_dripped_a_byte_at_a_time_is_cut_at_the_deadline(settings, scheme, reply):
    settings.CALLBACK_TIMEOUT_SECONDS = 1
    server = DripServer(reply, interval=0.3)  # each byte well within a read timeout; the whole reply is not
    try:
        result = post_callback(f"{scheme}://127.0.0.1:{server.port}/callback", {"n": 1})
    finally:
        server.stop()
    assert result.error == "timeout after 1 s: the reply did not complete in time"
    assert 1000 <= result.duration_ms < 10_000


def test_a_reply_dripped_over_tls_is_cut_at_the_deadline(settings, monkeypatch, tmp_path):
    settings.CALLBACK_TIMEOUT_SECONDS = 1
    cert, key = self_signed_certificate(tmp_path, "merchant.invalid")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    monkeypatch.setattr("requests.adapters.DEFAULT_CA_BUNDLE_PATH", cert)  # the client trusts this one certificate
    monkeypatch.setattr(transport, "resolve", lambda host, port: [(socket.AF_INET, socket.SOCK_STREAM, 6, "",
                                                                     ("127.0.0.1", port))])
    server = DripServer(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nsuccess", interval=0.3, tls=context)
    try:
        result = post_callback(f"https://merchant.invalid:{server.port}/callback", {"n": 1})
    finally:
        server.stop()
    assert result.error == "timeout after 1 s: the reply did not complete in time"
    assert 1000 <= result.duration_ms < 10_000


@pytest.mark.django_db(transaction=True)
def test_a_worker_keeps_its_connection_between_tasks_only_within_conn_max_age():
    connection.ensure_connection()
    connection.close_at = time.monotonic() + 600  # as CONN_MAX_AGE=600 sets it at connect
    kept = connection.connection
    _close_old_database_connections(task=None)
    assert connection.connection is kept and not connection.health_check_done  # checked before its next query
    connection.close_at = time.monotonic() - 1  # outlived CONN_MAX_AGE (0: at once, a fresh one per task)
    _close_old_database_connections(task=None)
    assert connection.connection is None
