"""The per-process coalescing of wake-ups (apps/common/coalesce.py): one call per burst, and never a request left
without a call that starts after it."""

import threading
import time

import pytest

from apps.common.coalesce import Coalesced


def wait_for(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_burst_of_requests_within_the_delay_makes_one_call_after_the_last_of_them():
    calls, requested = [], []
    wake = Coalesced(lambda: calls.append(time.monotonic()), delay=lambda: 0.2)
    for _ in range(5):
        requested.append(time.monotonic())
        wake.request()
    assert calls == []  # nothing on the requesting thread
    wait_for(lambda: calls)
    time.sleep(0.3)
    assert len(calls) == 1
    assert calls[0] > max(requested)


def test_a_request_made_while_the_call_runs_gets_a_call_of_its_own_that_starts_after_it():
    started, release, calls = threading.Event(), threading.Event(), []

    def slow_wake():
        calls.append(time.monotonic())
        started.set()
        release.wait(5)

    wake = Coalesced(slow_wake, delay=lambda: 0.05)
    wake.request()
    assert started.wait(5)
    late = time.monotonic()
    wake.request()  # the running call read (or scanned) before this request: it may not count for it
    release.set()
    wait_for(lambda: len(calls) == 2)
    assert calls[1] > late


def test_requests_after_a_call_start_a_new_timer():
    calls = []
    wake = Coalesced(lambda: calls.append(1), delay=lambda: 0.05)
    wake.request()
    wait_for(lambda: len(calls) == 1)
    wake.request()
    wait_for(lambda: len(calls) == 2)


def test_a_failing_call_is_logged_and_the_next_request_still_calls(caplog):
    outcomes = iter([RuntimeError("redis down"), None])
    calls = []

    def flaky():
        calls.append(1)
        if (error := next(outcomes)) is not None:
            raise error

    wake = Coalesced(flaky, delay=lambda: 0.05)
    wake.request()
    wait_for(lambda: len(calls) == 1)
    wait_for(lambda: "failed" in caplog.text)
    wake.request()
    wait_for(lambda: len(calls) == 2)


def test_no_delay_calls_at_once_on_the_requesting_thread():
    threads = []
    wake = Coalesced(lambda: threads.append(threading.current_thread()), delay=lambda: 0)
    wake.request()
    assert threads == [threading.current_thread()]


@pytest.mark.django_db(transaction=True)
def test_the_timer_thread_closes_the_database_connection_its_call_opened():
    from django.db import connections

    from apps.common.models import AuditLog

    used = []

    def wake_with_a_query():
        AuditLog.objects.count()  # a database cache (make run's default) opens a connection on this thread
        used.append(connections["default"])

    wake = Coalesced(wake_with_a_query, delay=lambda: 0.05)
    wake.request()
    wait_for(lambda: used)
    wait_for(lambda: used[0].connection is None)  # closed when the call ended, not left to the garbage collector
    assert used[0] is not connections["default"]  # it was the timer thread's own


def test_a_process_that_exits_normally_makes_the_pending_call_before_it_goes(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    marker = tmp_path / "called"
    script = (
        "import django, os\n"
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'config.settings.test')\n"
        "django.setup()\n"
        "from pathlib import Path\n"
        "from apps.common.coalesce import Coalesced\n"
        f"wake = Coalesced(lambda: Path({str(marker)!r}).write_text('woken'), delay=lambda: 60)\n"
        "wake.request()\n"  # the process ends long before the timer's 60 s
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "woken"
