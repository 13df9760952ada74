"""`make run` smoke test: with no DATABASE_URL the embedded PostgreSQL starts as `make run` starts it
(config/embedded_postgres.py, its data in a tmp directory through EMBEDDED_PGDATA), the local settings migrate,
bootstrap and answer GET /currencies on it, a second manage.py process (the second terminal) reaches the same
database with nothing else set, and after a Ctrl-C the server is gone."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import urllib.request

import psutil
from django.conf import settings

from tests.support.wait import wait_until


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _manage(*args: str) -> list[str]:
    return ["uv", "run", "--frozen", "python", "manage.py", *args]


def _currencies(port: int, runner: subprocess.Popen, log) -> dict | None:
    assert runner.poll() is None, log.read_text()[-3000:]
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/currencies", timeout=2) as response:
            assert response.status == 200
            return json.loads(response.read())
    except OSError:
        return None


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


def test_embedded_postgres_serves_reaches_a_second_terminal_and_stops_with_make_run(tmp_path):
    pgdata, log, port = tmp_path / "postgres", tmp_path / "run.log", _free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}}
    env["EMBEDDED_PGDATA"] = str(pgdata)
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.local"  # as make run exports, and a second terminal sets
    manage = " ".join(_manage())
    steps = f"{manage} migrate --noinput && {manage} createcachetable && {manage} bootstrap && " \
            f"exec {manage} runserver 127.0.0.1:{port} --noreload"
    with log.open("w") as out:  # a group of its own, as make's in a terminal, so a Ctrl-C can be sent to it
        runner = subprocess.Popen(["uv", "run", "--frozen", "python", "-m", "config.embedded_postgres", "sh", "-c",
                                   steps], cwd=settings.BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        # A fresh database's whole migration history, then bootstrap: past 50 s beside the suite's other xdist
        # workers on a busy 2-core machine (make test). A bound on start-up, not a contract.
        body = wait_until(lambda: _currencies(port, runner, log), timeout=150, interval=0.3,
                          what="migrate, bootstrap and runserver to answer GET /currencies")
        postmaster_pid = int((pgdata / "postmaster.pid").read_text().split()[0])
        second_terminal = subprocess.run(_manage("platform_keys"), cwd=settings.BASE_DIR, env=env,
                                         capture_output=True, text=True, timeout=60)
        os.killpg(runner.pid, signal.SIGINT)  # Ctrl-C
        runner.wait(timeout=30)
    finally:
        _stop_what_this_test_started(runner, pgdata)

    assert (body["code"], body["msg"]) == ("0", "OK")
    assert {item["code"] for item in body["data"]["items"]} >= {"PHP", "USD", "IDR", "VND", "JPY", "KWD"}
    assert second_terminal.returncode == 0, second_terminal.stderr[-2000:]
    assert [key["key_version"] for key in json.loads(second_terminal.stdout)["keys"]] == [1]
    assert "stopped" in log.read_text(), log.read_text()[-3000:]
    wait_until(lambda: _gone(postmaster_pid), timeout=5, what="the embedded server's postmaster to exit")
    assert not (pgdata / "postmaster.pid").exists()
