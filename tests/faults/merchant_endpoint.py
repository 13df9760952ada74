"""A real HTTP server on 127.0.0.1 playing merchants' callback endpoints, healthy and broken ones.

Each path (one merchant's callback URL) has a script of behaviours used in order, then a default:
  ok        200 "success"
  stall     accept, read the request, then say nothing for `stall_seconds` (longer than the 10 s timeout)
  reset     read the request, then close with SO_LINGER 0: the client sees a TCP reset
  redirect  302 to the healthy path (must not be followed)
  error500  500 with a body
  wrong     200 with a body that is not `success`
  trickle   200 and its headers at once, then the body `success` one byte every 2 s (14 s in all)
Every request is recorded with its arrival time and JSON body.
"""

import json
import socket
import struct
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BEHAVIOURS = ("ok", "stall", "reset", "redirect", "error500", "wrong", "trickle")
TRICKLE_INTERVAL = 2.0


@dataclass
class Hit:
    path: str
    behaviour: str
    body: dict | None
    at: float  # time.time() of arrival


class MerchantEndpoints:
    def __init__(self, stall_seconds: float = 30.0):
        self.stall_seconds = stall_seconds
        self.hits: list[Hit] = []
        self._scripts: dict[str, list[str]] = {}
        self._defaults: dict[str, str] = {}
        self._lock = threading.Lock()
        self._release = threading.Event()  # ends every stall at teardown
        endpoints = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                behaviour = endpoints._next(self.path, body)
                if behaviour == "stall":
                    endpoints._release.wait(endpoints.stall_seconds)
                    self._reply(200, "success")
                elif behaviour == "reset":
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    self.connection.close()
                elif behaviour == "redirect":
                    self._reply(302, "moved", {"Location": "/ok"})
                elif behaviour == "error500":
                    self._reply(500, "internal error")
                elif behaviour == "trickle":
                    self._trickle(b"success")
                elif behaviour == "wrong":
                    self._reply(200, '{"code":"success"}')
                else:
                    self._reply(200, "success")

            def _reply(self, status: int, text: str, headers: dict | None = None):
                payload = text.encode()
                try:
                    self.send_response(status)
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the platform gave up (timeout, or its worker was killed)
                self.close_connection = True

            def _trickle(self, payload: bytes):
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(payload)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.flush()
                    for i in range(len(payload)):
                        if endpoints._release.wait(TRICKLE_INTERVAL):
                            return
                        self.wfile.write(payload[i:i + 1])
                        self.wfile.flush()
                except OSError:
                    pass
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{path.lstrip('/')}"

    def behave(self, path: str, *script: str, default: str = "ok") -> str:
        """Script the behaviours of one path; returns its URL."""
        path = "/" + path.lstrip("/")
        assert all(b in BEHAVIOURS for b in (*script, default))
        with self._lock:
            self._scripts[path] = list(script)
            self._defaults[path] = default
        return self.url(path)

    def _next(self, path: str, body: dict | None) -> str:
        with self._lock:
            script = self._scripts.get(path)
            behaviour = script.pop(0) if script else self._defaults.get(path, "ok")
            self.hits.append(Hit(path, behaviour, body, time.time()))
            return behaviour

    def hits_for(self, path: str) -> list[Hit]:
        path = "/" + path.lstrip("/")
        with self._lock:
            return [h for h in self.hits if h.path == path]

    def start(self) -> "MerchantEndpoints":
        self.thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()
