"""`make run` as a newcomer runs it, in a copy of this checkout with a var/ of its own, on a free port: the default
stack's tests (tests/config/test_default_stack.py) and the soak against it (`make soak SOAK_STACK=make-run`)."""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import psutil
import requests

from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[2]


def copy_checkout() -> Path:
    """This checkout's files without .venv, var/ and git: what a fresh clone holds, in <tmp>/checkout. Outside
    pytest's tmp tree and readable by all: as root the embedded PostgreSQL runs as the wheel's system user, which
    must reach var/. The caller removes the parent directory."""
    top = Path(tempfile.mkdtemp(prefix="default-stack-"))
    top.chmod(0o755)
    copy = top / "checkout"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(
        ".venv", "var", ".git", "__pycache__", ".pytest_cache", ".hypothesis", "control", "*.pem", "node_modules"))
    copy.chmod(0o755)
    return copy


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def environment() -> dict:
    """A newcomer's shell: none of the suite's variables. The copy runs on this suite's .venv (the same lock) and
    `uv run` leaves it as it is (the SDK's editable install points at this checkout, not the copy)."""
    drop = {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE", "API_ROOT", "PORT",
            "EMBEDDED_PGDATA", "EMBEDDED_VALKEY_DIR", "PROMETHEUS_MULTIPROC_DIR", "VIRTUAL_ENV"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("PYTEST", "XDIST"))}
    env.update(UV_PROJECT_ENVIRONMENT=sys.prefix, UV_NO_SYNC="1", PYTHONUNBUFFERED="1")
    return env


class MakeRun:
    """`make run PORT=<free>` in the copy, in a session of its own; on a terminal of its own (a pty) when tty."""

    def __init__(self, checkout: Path, *, tty: bool, extra_env: dict | None = None):
        self.checkout, self.port = checkout, free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = checkout.parent / f"make-run-{self.port}.log"
        self.terminal = None
        self.env = {**environment(), **(extra_env or {})}
        # -o install-run: .venv is the suite's, installed (UV_NO_SYNC keeps every `uv run` from syncing it).
        command = ["make", "--no-print-directory", "-o", "install-run", "run", f"PORT={self.port}"]
        if tty:
            self.terminal, slave = os.openpty()
            # The new session's controlling terminal is the pty, as a shell's in a terminal window; its foreground
            # group is make's, so a ^C typed there is a Ctrl-C.
            become = ("import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
                      "os.execvp('make', sys.argv[1:])")
            self.proc = subprocess.Popen([sys.executable, "-c", become, *command], cwd=checkout, env=self.env,
                                         stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
            os.close(slave)
            threading.Thread(target=self._copy_the_terminal, daemon=True).start()
        else:
            with self.log.open("ab") as out:
                self.proc = subprocess.Popen(command, cwd=checkout, env=self.env, stdin=subprocess.DEVNULL,
                                             stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def _copy_the_terminal(self) -> None:
        with self.log.open("ab") as out:
            while True:
                try:
                    chunk = os.read(self.terminal, 65536)
                except OSError:
                    return  # the last process holding the terminal is gone
                if not chunk:
                    return
                out.write(chunk)
                out.flush()

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_ready(self, timeout: float) -> None:
        def ready():
            assert self.proc.poll() is None, f"make run exited {self.proc.returncode}:\n{self.text()[-4000:]}"
            text = self.text()
            if not ("celery@" in text and " ready." in text and "beat" in text):
                return False
            try:
                return requests.get(f"{self.base}/currencies", timeout=3).status_code == 200
            except requests.RequestException:
                return False

        wait_until(ready, timeout=timeout, interval=0.5, what="make run's web to answer and its worker to be ready")

    def everything(self) -> list[psutil.Process]:
        """make, what it started, and the embedded servers (pg_ctl starts PostgreSQL outside make's tree)."""
        processes = [psutil.Process(self.proc.pid)]
        with contextlib.suppress(psutil.NoSuchProcess):
            processes += psutil.Process(self.proc.pid).children(recursive=True)
        with contextlib.suppress(OSError, ValueError, psutil.NoSuchProcess):
            postmaster = int((self.checkout / "var/postgres/postmaster.pid").read_text().split()[0])
            processes.append(psutil.Process(postmaster))
        return processes

    def wait_exit(self, timeout: float) -> int:
        """make's exit status; past timeout, a failure that says what still runs and what the run printed last."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            alive = []
            for process in self.everything():
                with contextlib.suppress(psutil.NoSuchProcess):
                    alive.append(f"{process.pid} {process.status()} {' '.join(process.cmdline())[:160]}")
            with contextlib.suppress(OSError):
                status = Path(f"/proc/{self.proc.pid}/status").read_text().splitlines()
                alive.append("make's " + ", ".join(line for line in status if line.startswith(("Sig", "Shd"))))
            raise AssertionError(f"make still running {timeout:.0f} s after the stop; still alive:\n"
                                 + "\n".join(alive) + f"\n--- its output, last lines:\n{self.text()[-4000:]}") from None

    def manage(self, *args: str, stdin: str | None = None) -> dict:
        """`uv run python manage.py ...` in a second terminal of the copy: nothing set."""
        result = subprocess.run(["uv", "run", "python", "manage.py", *args], cwd=self.checkout, env=self.env,
                                input=stdin, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-3000:]
        return json.loads(result.stdout)

    def shell(self, code: str) -> str:
        """`uv run python manage.py shell -c CODE` in a second terminal of the copy; its standard output."""
        result = subprocess.run(["uv", "run", "python", "manage.py", "shell", "-c", code], cwd=self.checkout,
                                env=self.env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    def stop_leftovers(self) -> None:
        """After a failure: whatever of this run still runs."""
        for process in self.everything() if self.proc.poll() is None else []:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        with contextlib.suppress(OSError, ValueError, psutil.NoSuchProcess):
            psutil.Process(int((self.checkout / "var/valkey/valkey.pid").read_text().split()[0])).kill()
        with contextlib.suppress(OSError, ValueError, psutil.NoSuchProcess):
            postmaster = int((self.checkout / "var/postgres/postmaster.pid").read_text().split()[0])
            psutil.Process(postmaster).send_signal(signal.SIGQUIT)
        if self.terminal is not None:
            with contextlib.suppress(OSError):
                os.close(self.terminal)


    def database_url(self) -> str:
        """The embedded PostgreSQL's address, as config/embedded_postgres.py reads it from its postmaster.pid."""
        lines = (self.checkout / "var/postgres/postmaster.pid").read_text().splitlines()
        return f"postgres://postgres@/payments?host={lines[4]}&port={lines[3]}"

    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{int((self.checkout / 'var/valkey/port').read_text())}/0"
