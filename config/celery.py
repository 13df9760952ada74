"""Celery application: tasks are discovered in every app's tasks.py."""

import gc
import logging
import math
import os

from celery import Celery
from celery.signals import setup_logging, task_postrun, task_prerun, worker_ready
from django.db import close_old_connections
from django_structlog.celery.steps import DjangoStructLogInitStep

# Fail closed: without DJANGO_SETTINGS_MODULE, production settings, which refuse to start without their secrets
# (docs/runbook.md, "Start"). Development sets config.settings.local (make run does).
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")



class PaymentsCelery(Celery):
    def send_task(self, name, args=None, kwargs=None, countdown=None, eta=None, **options):
        """On RabbitMQ a countdown task waits in the native delayed delivery's queues, which count whole seconds (and
        refuse a countdown that rounds down to 0): a fractional countdown is rounded up, never run early
        (docs/architecture.md, "The broker"). On Redis the worker holds it for the exact time."""
        if countdown and countdown > 0 and self.conf.task_default_queue_type == "quorum":
            countdown = math.ceil(countdown)
        return super().send_task(name, args, kwargs, countdown=countdown, eta=eta, **options)


app = PaymentsCelery("payments")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Logs: a task queued during a request logs that request's request_id (django-structlog's receivers carry it in the
# task's headers); the worker formats its lines with Django's LOGGING (LOG_FORMAT), not Celery's own format.
app.steps["worker"].add(DjangoStructLogInitStep)


@worker_ready.connect
def _freeze_the_start_up_heap(**kwargs) -> None:
    """Moves what start-up allocated (Django, the apps, their imports: some 160,000 objects) out of the collector's
    reach: the collections a worker runs while serving, and the final one when it stops, no longer walk it. A
    worker stopping on Ctrl-C spent seconds in that final collection, past honcho's 5-second grace."""
    gc.freeze()


@setup_logging.connect
def _logging_from_django_settings(loglevel=None, **kwargs) -> None:
    """Django's LOGGING instead of Celery's; Celery's `--loglevel` still sets the level of Celery's own loggers (beat
    runs at WARNING: its INFO is a "Sending due task" line every 5 s). The apps' loggers keep LOG_LEVEL: a worker
    started in a test process must not silence them."""
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)
    if loglevel:
        logging.getLogger("celery").setLevel(loglevel)

# Database connections in a worker follow the web's rule (CONN_MAX_AGE, CONN_HEALTH_CHECKS), not Celery's default
# of closing every connection before and after every task: a fresh PostgreSQL connection per task cost more than
# a callback delivery's queries. Each task starts like a request does: a connection that outlived CONN_MAX_AGE or
# saw an error is closed, a kept one is health-checked before its first query. With CONN_MAX_AGE=0 (the default)
# every task still gets a fresh connection.
app.conf.update(CELERY_DB_REUSE_MAX=1_000_000)  # Celery's fixup then closes only once per million tasks


class QuietPeriodicTasks(logging.Filter):
    """Drops the worker's INFO lines "Task X received" and "Task X succeeded" of beat's periodic tasks (the sweepers
    run every 5-15 s): a periodic task says something only when it did something (its own INFO line) or failed
    (the worker's ERROR line, kept). Other tasks' lines (callback deliveries, payout submissions) stay."""

    def __init__(self, periodic_task_names=None):
        super().__init__()
        self._names = periodic_task_names

    def periodic_task_names(self) -> set[str]:
        if self._names is None:
            self._names = {entry["task"] for entry in app.conf.beat_schedule.values()}
        return self._names

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO:
            return True
        data = getattr(record, "data", None)
        return not (isinstance(data, dict) and data.get("name") in self.periodic_task_names())


_quiet_periodic_tasks = QuietPeriodicTasks()
for _logger in ("celery.worker.strategy", "celery.app.trace"):  # "received", "succeeded"
    logging.getLogger(_logger).addFilter(_quiet_periodic_tasks)


@task_prerun.connect
@task_postrun.connect
def _close_old_database_connections(task=None, **kwargs) -> None:
    if not getattr(getattr(task, "request", None), "is_eager", False):  # an eager task runs in its caller's connection
        close_old_connections()
