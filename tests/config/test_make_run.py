"""`make run`'s wrapper (config/embedded.py) after a run that was cut short, on an embedded PostgreSQL of the test's
own (EMBEDDED_PGDATA), and `make serve`'s port and stop. A fresh clone's first `make run` (initdb, migrate, bootstrap,
a second terminal, Ctrl-C) is tests/config/test_default_stack.py's."""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import urllib.request
from pathlib import Path

import psutil
import pytest
from django.conf import settings

from tests.support.wait import wait_until


@pytest.fixture
def run_dir():
    """A directory of this test's own outside pytest's tmp tree: as root the server runs as the wheel's system user,
    which must traverse to its data directory, and each pytest session (any on this machine) makes
    /tmp/pytest-of-root private again (0700) when it starts."""
    path = Path(tempfile.mkdtemp(prefix="make-run-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _manage(*args: str) -> list[str]:
    return ["uv", "run", "--frozen", "python", "manage.py", *args]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _stop_what_this_test_started(runner: subprocess.Popen, pgdata) -> None:
    """Whatever of the runner, what it started (in groups of their own) and the server still runs after a failure."""
    if runner.poll() is None:
        with contextlib.suppress(psutil.NoSuchProcess):
            below = psutil.Process(runner.pid).children(recursive=True)
            os.killpg(runner.pid, signal.SIGTERM)
            try:
                runner.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(runner.pid, signal.SIGKILL)
            for process in below:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()
    with contextlib.suppress(OSError, ValueError, psutil.NoSuchProcess):
        psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0])).send_signal(signal.SIGQUIT)


# --- a stop cut short ---------------------------------------------------------------------------------------

PING = "import psycopg; from config.embedded_postgres import database_url; psycopg.connect(database_url()).execute('SELECT 1')"


def _embedded(pgdata, log, *command: str) -> subprocess.Popen:
    """`make run`'s wrapper around COMMAND, in a group of its own (as make's in a terminal)."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update(EMBEDDED_PGDATA=str(pgdata), EMBEDDED_VALKEY_DIR=str(pgdata.parent / "valkey"),
               DJANGO_SETTINGS_MODULE="config.settings.local")
    with log.open("a") as out:
        return subprocess.Popen(["uv", "run", "--frozen", "python", "-m", "config.embedded", *command],
                                cwd=settings.BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _killed_mid_stop(pgdata, log) -> int:
    """A `make run` SIGKILLed (a supervisor after its grace period), its handle list left empty as a write cut short
    leaves it; returns the postmaster's pid (pg_ctl starts it in a session of its own: it survives)."""
    runner = _embedded(pgdata, log, "sleep", "600")
    try:
        wait_until(lambda: runner.poll() is None and "ready in" in log.read_text(), timeout=60, interval=0.2,
                   what="the embedded server to start")
        postmaster_pid = int((pgdata / "postmaster.pid").read_text().split()[0])
        os.killpg(runner.pid, signal.SIGKILL)
        runner.wait(timeout=10)
    except BaseException:
        _stop_what_this_test_started(runner, pgdata)
        raise
    (pgdata / ".handle_pids.json").write_text("")
    return postmaster_pid


def _starts_again(pgdata, log) -> None:
    """The next `make run` starts, serves its command and stops the server when it ends."""
    runner = _embedded(pgdata, log, "python", "-c", PING)
    try:
        code = runner.wait(timeout=90)
    finally:
        _stop_what_this_test_started(runner, pgdata)
    assert code == 0, log.read_text()[-3000:]
    assert not (pgdata / "postmaster.pid").exists(), log.read_text()[-3000:]


def test_make_run_starts_again_after_a_killed_run_and_reuses_the_server_it_left(run_dir):
    pgdata, log = run_dir / "postgres", run_dir / "run.log"
    postmaster_pid = _killed_mid_stop(pgdata, log)
    assert not _gone(postmaster_pid)  # still serving, from the killed run
    _starts_again(pgdata, log)
    wait_until(lambda: _gone(postmaster_pid), timeout=10, what="the left server to be stopped by the next run")
    assert "discarding the unreadable" in log.read_text()


def test_make_run_starts_again_after_the_server_was_killed_too_and_its_pid_reused(run_dir):
    pgdata, log = run_dir / "postgres", run_dir / "run.log"
    postmaster_pid = _killed_mid_stop(pgdata, log)
    os.kill(postmaster_pid, signal.SIGKILL)  # the server too (an OOM kill, a machine's reboot)
    wait_until(lambda: _gone(postmaster_pid), timeout=10, what="the killed postmaster to exit")
    # Its pid is now another process's (pids are reused), as after a reboot.
    # Run as the server's own user where it has one: postgres takes a pid it may not signal for a dead one.
    from config.embedded_postgres import SYSTEM_USER
    other = subprocess.Popen(["sleep", "600"], start_new_session=True, user=SYSTEM_USER)
    try:
        pidfile = pgdata / "postmaster.pid"
        pidfile.write_text("\n".join([str(other.pid), *pidfile.read_text().splitlines()[1:]]) + "\n")
        # The socket's lock file names it too; postgres refuses to start while that pid looks alive (as a killed
        # server's own pid does while it is an unreaped zombie: seen in CI).
        for lock in pgdata.glob(".s.PGSQL.*.lock"):
            lock.write_text("\n".join([str(other.pid), *lock.read_text().splitlines()[1:]]) + "\n")
        _starts_again(pgdata, log)
    finally:
        other.kill()
        other.wait(timeout=10)
    assert "removing the postmaster.pid of a server that is gone" in log.read_text()


# --- the port in one place; Ctrl-C stops the worker within honcho's grace ----------------------------------------


@pytest.mark.django_db(transaction=True)  # the test database's name in connection.settings_dict, for the processes
def test_make_serve_port_sets_every_link_and_ctrl_c_stops_the_worker_within_its_grace(run_dir):
    """`make serve PORT=N` (what `make run PORT=N` runs once its database is up), on the suite's migrated database:
    the web answers on N, the banner and a second terminal's create_staff print links on N, and a Ctrl-C stops the
    Celery worker by itself (warm shutdown) before honcho's 5-second grace ends: no SIGKILL."""
    port, log = _free_port(), run_dir / "serve.log"
    from django.db import connection

    database = connection.settings_dict  # the suite's test database (settings.DATABASES names the one it copies)
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE", "API_ROOT", "PORT"}}
    env["DATABASE_URL"] = (f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}")
    env["REDIS_URL"] = settings.REDIS_URL
    # The database is the suite's, already migrated: PREPARE=no (no migrate, no bootstrap); -o: nothing to install.
    with log.open("w") as out:
        runner = subprocess.Popen(["make", "--no-print-directory", "-o", "install-run", "serve", "PREPARE=no",
                                   f"PORT={port}"], cwd=settings.BASE_DIR, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: _alive(runner, log) and "celery@" in log.read_text() and " ready" in log.read_text()
                   and _home(port), timeout=150, interval=0.5, what="the web on the port and the worker to be ready")
        second_terminal = subprocess.run(
            _manage("create_staff", f"newcomer{port}", "--role", "risk-reviewer", "--password-stdin"),
            cwd=settings.BASE_DIR, env={**env, "DJANGO_SETTINGS_MODULE": "config.settings.local"},
            input="a-long-enough-password-42\n", capture_output=True, text=True, timeout=90)
        os.killpg(runner.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group
        runner.wait(timeout=30)
    finally:
        _stop_what_this_test_started(runner, run_dir / "no-embedded-server")
    text = log.read_text()
    assert f"Payments platform on http://127.0.0.1:{port}/ - admin http://127.0.0.1:{port}/admin/" in text
    assert f"Starting development server at http://127.0.0.1:{port}/" in text
    assert second_terminal.returncode == 0, second_terminal.stderr[-2000:]
    assert json.loads(second_terminal.stdout)["admin_url"] == f"http://127.0.0.1:{port}/admin/"
    assert "Warm shutdown" in text, text[-3000:]
    assert "sending SIGKILL" not in text, text[-3000:]
    assert "worker.1 stopped" in text


def _alive(runner: subprocess.Popen, log) -> bool:
    assert runner.poll() is None, log.read_text()[-3000:]
    return True


def _home(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False
