"""`make run`'s embedded Valkey (config/embedded_valkey.py), on a data directory of this test's own: what the broker
and the cache hold survives a stop and a start, a server a killed run left running is kept (not a second one
started beside it), and a stop leaves nothing running."""

import socket

import psutil
import pytest

from config import embedded_valkey


@pytest.fixture
def valkey_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(embedded_valkey, "DIRECTORY", tmp_path)
    monkeypatch.setattr(embedded_valkey, "PORT_FILE", tmp_path / "port")
    monkeypatch.setattr(embedded_valkey, "PID_FILE", tmp_path / "valkey.pid")
    monkeypatch.setattr(embedded_valkey, "LOG_FILE", tmp_path / "valkey.log")
    yield tmp_path
    embedded_valkey.stop()


def _command(*words: str) -> bytes:
    port = int(embedded_valkey.PORT_FILE.read_text())
    request = f"*{len(words)}\r\n" + "".join(f"${len(w)}\r\n{w}\r\n" for w in words)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request.encode())
        return sock.recv(1024)


def test_what_valkey_holds_survives_a_stop_and_a_start(valkey_dir):
    embedded_valkey.start()
    pid = int(embedded_valkey.PID_FILE.read_text())
    assert _command("RPUSH", "celery", "a queued task") == b":1\r\n"
    embedded_valkey.stop()
    assert not embedded_valkey.running() and not psutil.pid_exists(pid)
    assert not embedded_valkey.PID_FILE.exists()

    embedded_valkey.start()
    assert embedded_valkey.running()
    assert _command("LPOP", "celery") == b"$13\r\na queued task\r\n"
    assert embedded_valkey.redis_url() == f"redis://127.0.0.1:{int(embedded_valkey.PORT_FILE.read_text())}/0"


def test_a_server_a_killed_run_left_running_is_kept_and_stopped_by_the_next_run(valkey_dir):
    embedded_valkey.start()
    left = int(embedded_valkey.PID_FILE.read_text())
    embedded_valkey.start()  # the next run, its predecessor killed before it could stop the server
    assert int(embedded_valkey.PID_FILE.read_text()) == left
    assert len([p for p in psutil.process_iter(["name", "cwd"]) if (p.info["name"] or "").startswith("valkey")
                and p.info["cwd"] == str(valkey_dir)]) == 1
    embedded_valkey.stop()
    assert not embedded_valkey.running()
