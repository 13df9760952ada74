"""Real processes for the fault drills: a private redis-server, the web app under gunicorn, Celery worker and beat.

Every process is started in its own session (process group = its pid), so a drill can SIGKILL a whole Celery
worker (main process and pool children) and teardown can end exactly what the drill started, nothing else.
Logs go to files in the test's tmp_path; their tails are attached to assertion messages.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests
from django.conf import settings
from django.db import connection

from tests.support.wait import wait_until  # the suite's one wait helper; the drills import it from here too


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Proc:
    """One started process group with its log file."""

    def __init__(self, name: str, argv: list[str], env: dict, log_path: Path):
        self.name, self.argv, self.log_path = name, argv, log_path
        self._log = open(log_path, "ab")
        self.popen = subprocess.Popen(argv, cwd=settings.BASE_DIR, env=env, stdin=subprocess.DEVNULL,
                                      stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        self.started = time.monotonic()

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, chars: int = 3000) -> str:
        return f"--- {self.name} (pid {self.pid}) log tail ---\n{self.log()[-chars:]}"

    def wait_for_log(self, text: str, *, timeout: float) -> None:
        def seen():
            if not self.alive():
                raise AssertionError(f"{self.name} exited with {self.popen.returncode}\n{self.tail()}")
            return text in self.log()

        try:
            wait_until(seen, timeout=timeout, interval=0.1, what=f"{self.name} log line {text!r}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.tail()}") from None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole process group this Proc started (pgid == pid: start_new_session)."""
        if self.alive():
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the group, SIGKILL it after `grace` seconds; always reaps the process."""
        if self.alive():
            self.kill(signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        # Pool children may outlive their parent for a moment: SIGKILL the group whatever happened above.
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._log.close()


class PrivateRedis:
    """A redis-server of the drill's own, on its own port, without persistence; can be stopped and restarted."""

    BINARY = shutil.which("redis-server") or "/usr/bin/redis-server"

    def __init__(self, procs: "Processes"):
        self.procs = procs
        self.port = free_port()
        self.proc: Proc | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "PrivateRedis":
        self.proc = self.procs.start("redis", [self.BINARY, "--port", str(self.port), "--bind", "127.0.0.1",
                                               "--save", "", "--appendonly", "no", "--daemonize", "no"])
        self.proc.wait_for_log("Ready to accept connections", timeout=10)
        return self

    def stop(self) -> None:
        """Redis goes away hard (SIGKILL): queued messages and nonces are lost, as in a crash."""
        if self.proc is not None:
            self.proc.kill(signal.SIGKILL)
            self.proc.popen.wait(timeout=10)

    def freeze(self) -> None:
        """Redis hangs (SIGSTOP): the kernel still accepts connections and takes commands, nothing is answered."""
        self.proc.kill(signal.SIGSTOP)

    def thaw(self) -> None:
        self.proc.kill(signal.SIGCONT)

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False


class PrivateRabbit:
    """A RabbitMQ node of the drill's own (tests/support/rabbitmq.py, `RabbitNode`) on free ports of 127.0.0.1, data
    under the test's tmp_path: it can crash and start again on the same ports and data, the machine's RabbitMQ
    untouched."""

    def __init__(self, procs: "Processes", *, ready_timeout: float = 120):
        from tests.support.rabbitmq import RabbitNode

        self.procs, self.ready_timeout = procs, ready_timeout
        self.node = RabbitNode(procs.tmp_path / "rabbitmq", port=free_port(), dist_port=free_port())
        self.proc: Proc | None = None

    @property
    def url(self) -> str:
        return self.node.url

    def start(self) -> float:
        """Start the node and return the seconds until it accepted connections."""
        started = time.monotonic()
        self.proc = self.procs.start("rabbitmq", self.node.command(), self.node.env)
        self.proc.wait_for_log(self.node.READY_LINE, timeout=self.ready_timeout)
        return round(time.monotonic() - started, 2)

    def crash(self) -> None:
        """The server dies at once (SIGKILL to the node's process group): connections reset, nothing flushed that
        was not already on disk."""
        self.proc.kill(signal.SIGKILL)
        self.proc.popen.wait(timeout=10)

    def queues(self, vhost: str = "/") -> dict[str, dict]:
        return self.node.queues(vhost)


class Processes:
    """Starts processes for one drill and ends every one of them at teardown, even when the drill failed."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.started: list[Proc] = []
        self._starting = threading.Lock()  # several hosts start side by side (tests/hosts): one log file each

    def start(self, name: str, argv: list[str], env: dict | None = None) -> Proc:
        with self._starting:
            index = sum(1 for p in self.started if p.name == name)
            proc = Proc(name, argv, env or dict(os.environ), self.tmp_path / f"{name}-{index}.log")
            self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.started):
            proc.stop()

    def tails(self) -> str:
        return "\n".join(p.tail(2000) for p in self.started if p.name != "redis")


def database_url(*, application_name: str = "", port: int | None = None) -> str:
    """The database pytest-django made for this run (test_<name>): subprocesses must use the very same one.
    `application_name` tags the connections in pg_stat_activity; `port` reaches it through a TcpGate."""
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    host = "127.0.0.1" if port else s["HOST"] or "127.0.0.1"
    url = f"postgres://{auth}@{host}:{port or s['PORT'] or 5432}/{s['NAME']}"
    return f"{url}?application_name={application_name}" if application_name else url


class Platform:
    """The platform as it runs in production: gunicorn, a Celery worker, Celery beat; on PostgreSQL and Redis."""

    def __init__(self, procs: Processes, redis: PrivateRedis, *, ready_timeout: float = 40, broker_url: str = "",
                 host: str = "127.0.0.1", **settings_env):
        """`broker_url`: the Celery broker when it is not `redis` (a RabbitMQ vhost, tests/support/rabbitmq.py).
        `host`: the loopback address gunicorn binds (127.0.0.2, 127.0.0.3, ...: one per host of tests/hosts)."""
        self.procs, self.redis = procs, redis
        self.ready_timeout = ready_timeout  # seconds each process may take to be ready (longer on a busy machine)
        self.host, self.port = host, free_port()
        self.base = f"http://{host}:{self.port}"
        self.env = {k: v for k, v in os.environ.items() if k not in {"CELERY_BROKER_URL", "PYTHONPATH"}}
        self.env.update({
            "DJANGO_SETTINGS_MODULE": "config.settings.test", "DATABASE_URL": database_url(),
            "REDIS_URL": redis.url, "API_ROOT": self.base, "LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1",
        })
        if broker_url:
            self.env["CELERY_BROKER_URL"] = broker_url
        self.env.update({k: str(v) for k, v in settings_env.items()})
        self.web: Proc | None = None
        self.workers: list[Proc] = []
        self.beats = 0

    def start_all(self) -> "Platform":
        """Web, beat and one worker, as production runs them."""
        self.start_web()
        self.start_beat()
        self.start_worker()
        return self

    def start_web(self, *, workers: int = 2, extra_env: dict | None = None) -> Proc:
        self.web = self.procs.start("web", [
            sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi:application",
            "--bind", f"{self.host}:{self.port}",
            "--workers", str(workers), "--timeout", "60", "--graceful-timeout", "2", "--error-logfile", "-",
        ], {**self.env, "DATABASE_URL": database_url(application_name="faults-web"), **(extra_env or {})})

        def answers():
            if not self.web.alive():
                raise AssertionError(f"gunicorn exited\n{self.web.tail()}")
            try:
                return requests.get(f"{self.base}/currencies", timeout=2).status_code == 200
            except requests.RequestException:
                return False

        wait_until(answers, timeout=self.ready_timeout, interval=0.2, what="gunicorn answering /currencies")
        return self.web

    def start_worker(self, *, concurrency: int = 16, pool: str = "threads", wait: bool = True) -> Proc:
        index = len(self.workers)
        worker = self.procs.start("worker", [
            sys.executable, "-m", "celery", "-A", "config", "worker", "--loglevel", "INFO",
            "--pool", pool, "--concurrency", str(concurrency), "-n", f"drill{index}-{self.port}-{os.getpid()}@%h",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
        ], self.env)
        self.workers.append(worker)
        if wait:
            worker.wait_for_log(" ready.", timeout=self.ready_timeout)
        return worker

    def start_beat(self, *, extra_env: dict | None = None) -> Proc:
        """A beat with a schedule file of its own, as each host's is (a second one stands by: config/beat.py)."""
        self.beats += 1
        beat = self.procs.start("beat", [
            sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO",
            "--schedule", str(self.procs.tmp_path / f"celerybeat-schedule-{self.port}-{self.beats}"),
        ], {**self.env, **(extra_env or {})})
        beat.wait_for_log("beat: Starting", timeout=self.ready_timeout)
        return beat
