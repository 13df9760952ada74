"""Periodic tasks say something only when they did something: with nothing to do they log nothing, and the
worker's own "received" / "succeeded" INFO lines for beat's tasks are dropped (failures stay)."""

import logging

import pytest
from django.conf import settings

from apps.callbacks.tasks import sweep_due_deliveries
from apps.channels.tasks import reconcile_channels
from apps.collection.tasks import expire_due_orders, release_settlement
from apps.ledger.tasks import prepare_daily_statements
from apps.payout.tasks import sweep_stuck_payouts
from config.celery import QuietPeriodicTasks

PERIODIC = [sweep_due_deliveries, expire_due_orders, release_settlement, sweep_stuck_payouts, prepare_daily_statements,
            reconcile_channels]


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
