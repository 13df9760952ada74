"""A worker keeps its connections to a merchant's host alive between attempts: per hostname and checked
address, so the SSRF guard, the address pinning, the whole-attempt deadline and the reply cap hold for a kept
connection exactly as for a new one. Counted on real receivers: the TCP connections they accepted."""

import socket
import threading
import time

import pytest
from django.test import override_settings

from apps.callbacks import transport
from apps.callbacks.deliver import callback_deliver
from apps.callbacks.models import CallbackEvent
from apps.callbacks.transport import post_callback
from tests.support.receiver import CallbackReceiver, Reply


def _resolving(monkeypatch, answers: dict):
    """DNS as a dict the test can change: hostname -> address."""
    monkeypatch.setattr(transport, "resolve", lambda host, port: [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], port))])


@pytest.fixture
def keep_alive_receiver():
    receiver = CallbackReceiver(keep_alive=True).start()
    yield receiver
    receiver.stop()


@override_settings(CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT=1)  # one attempt at a time: batches of one, one after another
def test_attempts_to_one_host_reuse_one_tcp_connection(hooked_merchant, keep_alive_receiver, enqueue):
    hooked_merchant.collection_callback_url = keep_alive_receiver.url
    hooked_merchant.save()
    events = [enqueue(hooked_merchant, no=f"C-reuse-{n}") for n in range(3)]

    callback_deliver(event_id=events[0].pk)  # the task goes on with the merchant's next due events
    recorded = [CallbackEvent.objects.get(pk=event.pk) for event in events]

    assert [e.status for e in recorded] == [CallbackEvent.Status.DELIVERED] * 3
    assert len(keep_alive_receiver.requests) == 3
    assert keep_alive_receiver.connections == 1


def test_a_changed_dns_answer_gets_a_connection_to_the_new_address(monkeypatch, keep_alive_receiver):
    port = keep_alive_receiver.server.server_address[1]
    moved = CallbackReceiver(keep_alive=True, host="127.0.0.2", port=port).start()  # the same port, another address
    try:
        answers = {"merchant.test": "127.0.0.1"}
        _resolving(monkeypatch, answers)
        url = f"http://merchant.test:{port}/callback"
        assert post_callback(url, {"n": 1}).success
        answers["merchant.test"] = "127.0.0.2"
        assert post_callback(url, {"n": 2}).success
    finally:
        moved.stop()
    # The second attempt went to the address checked for it, not down the connection kept to the old one.
    assert [r.body["n"] for r in keep_alive_receiver.requests] == [1]
    assert [r.body["n"] for r in moved.requests] == [2]
    assert moved.requests[0].headers["Host"] == f"merchant.test:{port}"


def test_a_host_now_resolving_to_a_non_public_address_is_refused_though_a_connection_to_it_is_kept(
        monkeypatch, keep_alive_receiver):
    port = keep_alive_receiver.server.server_address[1]
    answers = {"merchant.test": "127.0.0.1"}
    _resolving(monkeypatch, answers)
    url = f"http://merchant.test:{port}/callback"
    assert post_callback(url, {"n": 1}).success  # private hosts allowed (test settings): a connection is kept

    with override_settings(CALLBACK_ALLOW_PRIVATE_HOSTS=False):
        loopback = post_callback(url, {"n": 2})
        answers["merchant.test"] = "10.0.0.5"
        private = post_callback(url, {"n": 3})

    assert "non-public address 127.0.0.1 (loopback); refused" in loopback.error
    assert "non-public address 10.0.0.5 (private); refused" in private.error
    assert len(keep_alive_receiver.requests) == 1


def test_two_hostnames_on_one_address_do_not_share_a_connection(monkeypatch, keep_alive_receiver):
    port = keep_alive_receiver.server.server_address[1]
    _resolving(monkeypatch, {"a.merchant.test": "127.0.0.1", "b.merchant.test": "127.0.0.1"})
    for host in ("a.merchant.test", "b.merchant.test", "a.merchant.test", "b.merchant.test"):
        assert post_callback(f"http://{host}:{port}/callback", {"host": host}).success
    assert keep_alive_receiver.connections == 2
    assert [r.headers["Host"].split(":")[0] for r in keep_alive_receiver.requests] == [
        "a.merchant.test", "b.merchant.test", "a.merchant.test", "b.merchant.test"]


def test_a_reply_over_the_cap_closes_its_connection(keep_alive_receiver):
    keep_alive_receiver.script(Reply(200, "x" * (transport.MAX_REPLY_BYTES * 4)))
    first = post_callback(keep_alive_receiver.url, {"n": 1})
    second = post_callback(keep_alive_receiver.url, {"n": 2})
    assert first.error == "reply is not 'success'" and second.success
    # The rest of the long reply is never read (nor mistaken for the next reply): its connection was closed.
    assert keep_alive_receiver.connections == 2


class KeptThenDripped:
    """One kept-alive connection: the first request is answered at once, the second a byte every `interval`."""

    def __init__(self, interval: float):
        self.interval = interval
        self.accepted = 0
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
            self.accepted += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        reply = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nsuccess"
        try:
            conn.recv(65536)
            conn.sendall(reply)
            conn.recv(65536)
            for i in range(len(reply)):
                if self.stopped.wait(self.interval):
                    break
                conn.sendall(reply[i:i + 1])
        except OSError:
            pass
        finally:
            conn.close()

    def stop(self) -> None:
        self.stopped.set()
        self.listener.close()


def test_a_reply_dripped_on_a_kept_connection_is_cut_at_the_deadline(settings):
    settings.CALLBACK_TIMEOUT_SECONDS = 1
    server = KeptThenDripped(interval=0.3)  # each byte within a read timeout; the whole reply is not
    try:
        first = post_callback(f"http://127.0.0.1:{server.port}/callback", {"n": 1})
        started = time.monotonic()
        second = post_callback(f"http://127.0.0.1:{server.port}/callback", {"n": 2})
        took = time.monotonic() - started
    finally:
        server.stop()
    assert first.success and server.accepted == 1  # the second attempt used the kept connection
    assert second.error == "timeout after 1 s: the reply did not complete in time"
    assert 1 <= took < 2
