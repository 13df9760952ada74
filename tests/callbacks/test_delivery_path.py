"""The delivery hot path's shortcuts keep the guarantees: one watchdog thread cuts every attempt at its own
deadline; a worker keeps its database connection across tasks only as the web does (CONN_MAX_AGE, health check)."""

import threading
import time

import pytest
from django.db import connection

from apps.callbacks import transport
from apps.callbacks.transport import post_callback
from config.celery import _close_old_database_connections
from tests.support.receiver import Reply


def test_one_watchdog_cuts_concurrent_stalled_attempts_each_at_its_own_deadline(callback_receiver, settings):
    settings.CALLBACK_TIMEOUT_SECONDS = 1
    callback_receiver.default = Reply(200, "success", delay=4)
    results = {}

    def attempt(name: str, start_after: float) -> None:
        time.sleep(start_after)
        results[name] = post_callback(callback_receiver.url, {"n": name})

    threads = [threading.Thread(target=attempt, args=(f"a{i}", i * 0.3)) for i in range(4)]
    [t.start() for t in threads]
    [t.join(timeout=10) for t in threads]

    assert sorted(results) == ["a0", "a1", "a2", "a3"]
    for result in results.values():
        assert not result.success and "timeout after 1 s" in result.error
        assert 900 <= result.duration_ms < 2500  # from its own start, not from the first attempt's
    watchdogs = [t for t in threading.enumerate() if t.name == "callback-watchdog"]
    assert len(watchdogs) == 1


def test_an_attempt_that_finishes_in_time_is_not_cut_later(callback_receiver, settings):
    settings.CALLBACK_TIMEOUT_SECONDS = 1
    fast = post_callback(callback_receiver.url, {"n": 1})
    time.sleep(1.2)  # past the fast attempt's deadline: the watchdog must not touch what comes next
    callback_receiver.default = Reply(200, "success", delay=0.3)
    slower = post_callback(callback_receiver.url, {"n": 2})
    assert fast.success and slower.success and not transport._attempt.current


@pytest.mark.django_db(transaction=True)
def test_a_worker_keeps_its_connection_between_tasks_only_within_conn_max_age():
    connection.ensure_connection()
    connection.close_at = time.monotonic() + 600  # as CONN_MAX_AGE=600 sets it at connect
    kept = connection.connection
    _close_old_database_connections(task=None)
    assert connection.connection is kept and not connection.health_check_done  # checked before its next query
    connection.close_at = time.monotonic() - 1  # outlived CONN_MAX_AGE (0: at once, a fresh one per task)
    _close_old_database_connections(task=None)
    assert connection.connection is None
