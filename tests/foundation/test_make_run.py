"""`make run` smoke test: the embedded default (local settings, SQLite, no Redis) migrates, bootstraps, starts
and answers GET /currencies."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

from django.conf import settings


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _manage(*args: str) -> list[str]:
    return ["uv", "run", "--frozen", "python", "manage.py", *args]


def test_embedded_default_starts_and_answers_currencies(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'db.sqlite3'}"  # an absolute path: sqlite:////tmp/...
    for step in (["migrate", "--noinput"], ["createcachetable"], ["bootstrap"]):
        done = subprocess.run(_manage(*step), cwd=settings.BASE_DIR, env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, (step, done.stderr[-2000:])
    assert json.loads(done.stdout)["platform_key_version"] == 1

    port = _free_port()
    server = subprocess.Popen(_manage("runserver", f"127.0.0.1:{port}", "--noreload"), cwd=settings.BASE_DIR,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline, last_error = time.monotonic() + 20, None
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/currencies", timeout=2) as response:
                    status, body = response.status, json.loads(response.read())
                break
            except OSError as exc:
                last_error = exc
                assert server.poll() is None, server.stderr.read().decode()[-2000:]
                time.sleep(0.3)
        else:
            raise AssertionError(f"runserver did not answer within 20 s: {last_error!r}")
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the process group this test started, and nothing else
        server.wait(timeout=10)
    assert status == 200 and (body["code"], body["msg"]) == ("0", "OK")
    assert {item["code"] for item in body["data"]["items"]} >= {"PHP", "USD", "IDR", "VND", "JPY", "KWD"}
