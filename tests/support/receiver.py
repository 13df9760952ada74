"""A real HTTP server on 127.0.0.1 standing in for a merchant's callback endpoint.

Replies are scripted: `receiver.script(Reply(500), Reply(200, "success"))`; once the script is used up the
default reply (200 "success") is given. Every request is recorded with its headers and JSON body.
"""

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    status: int = 200
    body: str = "success"
    delay: float = 0.0
    headers: dict = field(default_factory=dict)


@dataclass
class Received:
    path: str
    headers: dict
    body: dict | None
    raw: bytes
    at: float


class CallbackReceiver:
    """`keep_alive=True` answers in HTTP/1.1 and keeps the connection open between requests, as most merchants'
    servers do; `connections` counts the TCP connections accepted."""

    def __init__(self, *, keep_alive: bool = False, host: str = "127.0.0.1", port: int = 0):
        self.requests: list[Received] = []
        self.connections = 0
        self._script: list[Reply] = []
        self.default = Reply()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def setup(self):
                super().setup()
                with receiver._lock:
                    receiver.connections += 1

            def do_POST(self):  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                with receiver._lock:
                    reply = receiver._script.pop(0) if receiver._script else receiver.default
                    receiver.requests.append(Received(self.path, dict(self.headers), body, raw, time.time()))
                    receiver._arrived.notify_all()
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.body.encode()
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up (timeout) before the stalled reply

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/callback"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def wait_for(self, count: int, timeout: float = 15.0) -> list[Received]:
        """Block until at least `count` requests arrived; returns them (fails the test on timeout)."""
        deadline = time.time() + timeout
        with self._lock:
            while len(self.requests) < count:
                remaining = deadline - time.time()
                if remaining <= 0:
                    raise AssertionError(f"expected {count} callbacks, got {len(self.requests)} in {timeout}s")
                self._arrived.wait(remaining)
            return list(self.requests)

    def start(self) -> "CallbackReceiver":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
