"""A switchable HTTP gate in front of an upstream emulator, on its own fixed port (127.0.0.1 only), to drive an
upstream through outages, slowness and recovery without touching the emulator:

  up      forwards each request and its answer
  down    the port is closed: connections are refused (nothing reaches the upstream: a definite "not taken")
  slow    forwards the request (the upstream acts on it), then holds the answer past the client's timeout
  5xx     answers 503 without forwarding (ambiguous to the client; nothing was created)
"""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests


class UpstreamGate:
    def __init__(self, target_url: str, *, slow_seconds: float = 2.5):
        self.target_url = target_url
        self.slow_seconds = slow_seconds
        self.mode = "up"
        self.port = 0
        self.server = None
        self.forwarded: list[tuple[str, str]] = []
        self._serve()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                gate._forward(self, "GET")

            def do_POST(self):  # noqa: N802
                gate._forward(self, "POST")

            def log_message(self, *args):
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def set(self, mode: str) -> None:
        """up / down / slow / 5xx."""
        if mode == "down" and self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        elif mode != "down" and self.server is None:
            self._serve()
        self.mode = mode

    def stop(self) -> None:
        self.set("down")

    def _forward(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        if self.mode == "5xx":
            return self._reply(handler, 503, b'{"error_code": "SERVER_ERROR", "message": "unavailable"}')
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("host", "content-length")}
        answer = requests.request(method, self.target_url + handler.path, data=raw, headers=headers, timeout=30,
                                  allow_redirects=False)
        self.forwarded.append((method, handler.path))
        if self.mode == "slow":
            time.sleep(self.slow_seconds)  # the upstream acted; the client gave up waiting for this answer
        self._reply(handler, answer.status_code, answer.content)

    @staticmethod
    def _reply(handler, status: int, payload: bytes) -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except OSError:
            pass
