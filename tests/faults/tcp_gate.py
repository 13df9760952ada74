"""A TCP forwarder on 127.0.0.1 in front of a server (the machine's PostgreSQL), which a drill can cut (every
connection reset, new ones refused), hang (connections accepted, nothing forwarded: a black-holed path) and open
again, without touching the server that other suites share."""

import socket
import struct
import threading

from tests.faults.processes import free_port


def _reset(sock: socket.socket) -> None:
    """End the connection at once, as a crashed server would: shut down (which also wakes a thread blocked
    reading it; close alone would not), then close with a TCP reset (SO_LINGER 0)."""
    for end in (lambda: sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)),
                lambda: sock.shutdown(socket.SHUT_RDWR)):
        try:
            end()
        except OSError:
            pass
    sock.close()


class TcpGate:
    def __init__(self, target_port: int):
        self.target = ("127.0.0.1", target_port)
        self.port = free_port()
        self.mode = "open"
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._listen()

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # the listener was closed (cut)
            with self._lock:
                self._sockets.add(client)
            if self.mode == "hang":
                continue  # accepted, never answered
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                self._drop(client)
                continue
            with self._lock:
                self._sockets.add(upstream)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        self._drop(source)
        self._drop(sink)

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
        _reset(sock)

    def _reset_all(self) -> None:
        with self._lock:
            sockets, self._sockets = list(self._sockets), set()
        for sock in sockets:
            _reset(sock)

    def cut(self) -> None:
        """The server is gone: open connections reset, new ones refused."""
        self.mode = "closed"
        if self._listener is not None:
            _reset(self._listener)  # shut down first: that also ends the accept() blocked on it
            self._listener = None
        self._reset_all()

    def hang(self) -> None:
        """The path is black-holed: open connections reset (so pools reconnect), new ones accepted and not answered."""
        if self._listener is None:
            self._listen()
        self.mode = "hang"
        self._reset_all()

    def open(self) -> None:
        self.mode = "open"
        self._reset_all()  # connections accepted while hung are not forwarded: the client sees them fail
        if self._listener is None:
            self._listen()

    def close(self) -> None:
        self.cut()
