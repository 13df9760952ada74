"""Periodic tasks say something only when they did something: with nothing to do they log nothing, and the
worker's own "received" / "succeeded" INFO lines for beat's tasks are dropped (failures stay)."""

import logging

import pytest
from django.conf import settings

from apps.callbacks.tasks import sweep_due_deliveries
from apps.channels.tasks import reconcile_channels
from apps.collection.tasks import expire_due_orders, release_settlement, sweep_stranded_payins
from apps.common.tasks import create_partitions, drop_expired_partitions
from apps.ledger.tasks import prepare_daily_statements
from apps.payout_batches.tasks import resume_payout_batches
from apps.payout.tasks import sweep_stuck_payouts
from apps.portal.tasks import resume_refund_requests
from config.celery import QuietPeriodicTasks

PERIODIC = [sweep_due_deliveries, expire_due_orders, release_settlement, sweep_stuck_payouts, prepare_daily_statements,
            reconcile_channels, sweep_stranded_payins, resume_payout_batches, resume_refund_requests, create_partitions,
            drop_expired_partitions]


def test_every_beat_entry_is_covered_here():
    assert {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()} == {task.name for task in PERIODIC}


@pytest.mark.django_db
def test_periodic_tasks_with_nothing_to_do_log_nothing(bootstrapped, caplog):
    with caplog.at_level(logging.DEBUG):
        for task in PERIODIC:
            task()
    assert [r for r in caplog.records if r.name.startswith(("apps.", "config.", "celery."))] == []


def worker_record(logger: str, level: int, task_name: str) -> logging.LogRecord:
    """A record as Celery's worker logs it: the task's context in `data` (celery.app.trace.info)."""
    context = {"id": "x", "name": task_name, "runtime": 0.01, "return_value": 0}
    record = logging.getLogger(logger).makeRecord(logger, level, __file__, 1, "Task %(name)s[%(id)s] succeeded",
                                                  (context,), None, extra={"data": context})
    return record


@pytest.mark.parametrize("logger", ["celery.worker.strategy", "celery.app.trace"])
def test_worker_lines_of_periodic_tasks_are_dropped_other_tasks_and_failures_kept(logger):
    quiet = QuietPeriodicTasks()
    assert quiet.filter(worker_record(logger, logging.INFO, "apps.callbacks.tasks.sweep_due_deliveries")) is False
    assert quiet.filter(worker_record(logger, logging.INFO, "apps.callbacks.tasks.deliver_callback")) is True
    assert quiet.filter(worker_record(logger, logging.ERROR, "apps.callbacks.tasks.sweep_due_deliveries")) is True
    assert quiet.filter(logging.LogRecord(logger, logging.INFO, __file__, 1, "other", (), None)) is True


def test_the_filter_is_on_the_worker_loggers():
    for logger in ("celery.worker.strategy", "celery.app.trace"):
        assert any(isinstance(f, QuietPeriodicTasks) for f in logging.getLogger(logger).filters)



def _beat_output(tmp_path, loglevel: str, *, until: str | None = None, seconds: float = 30) -> tuple[str, float]:
    """Celery beat as the Procfile runs it, on an in-memory broker (nothing queued anywhere): its output until the
    line `until` (or `seconds`), and the seconds that took."""
    import os
    import subprocess
    import sys
    import threading
    import time

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "CELERY_BROKER_URL": "memory://",
           "LOG_FORMAT": "plain"}
    started = time.monotonic()
    beat = subprocess.Popen([sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", loglevel,
                             "--schedule", str(tmp_path / f"schedule-{loglevel}")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    lines: list[str] = []
    seen = threading.Event()

    def read():
        for line in beat.stdout:
            lines.append(line)
            if until and until in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    seen.wait(seconds)
    took = time.monotonic() - started
    beat.terminate()
    beat.wait(timeout=20)
    reader.join(timeout=5)
    return "".join(lines), took


def test_beat_at_warning_does_not_log_each_task_it_sends_and_at_info_it_does(tmp_path):
    loud, took = _beat_output(tmp_path, "INFO", until="Sending due task")  # every entry is due at a first start
    assert "Sending due task" in loud, loud
    quiet, _ = _beat_output(tmp_path, "WARNING", seconds=took + 1)  # past its first tick, which sends every entry
    assert "Sending due task" not in quiet and "Traceback" not in quiet, quiet
