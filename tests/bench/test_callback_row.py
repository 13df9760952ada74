"""make bench's callback row (bench/callback_throughput.py) measures the platform as deployed: a delivery that needs
the sweeper (a retry come due, a task lost with its message) is made within the row's window, and a row that leaves
any event undelivered is refused. A real worker (with its beat) on the test database and Redis, a real receiver."""

import os

import pytest

from bench.callback_throughput import measure
from config.celery import app
from tests.faults.processes import database_url

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

EVENTS = 20


def worker_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in {"CELERY_BROKER_URL", "PYTHONPATH"}}
    return {**env, "DJANGO_SETTINGS_MODULE": "config.settings.test", "DATABASE_URL": database_url()}


def test_an_event_whose_first_attempt_failed_is_delivered_within_the_rows_window(bootstrapped):
    app.control.purge()  # messages of earlier tests name rows that no longer exist
    result = measure(env=worker_env(), events=EVENTS, timeout=90, concurrency=4, failing_first=1)
    # The 500 is retried 15 s later (docs/api.md, "Callbacks"), queued by the sweeper the worker's beat runs.
    assert (result["ok"], result["delivered"], result["undelivered"]) == (True, EVENTS, 0), result


def test_a_run_that_leaves_an_event_undelivered_is_refused(bootstrapped):
    app.control.purge()
    # A window shorter than the first retry delay: the failed event cannot be delivered within it.
    result = measure(env=worker_env(), events=EVENTS, timeout=10, concurrency=4, failing_first=1)
    assert not result["ok"] and result["undelivered"] >= 1, result
    assert result["delivered"] + result["undelivered"] == EVENTS
