"""A real Celery worker (in a thread of the test process) consuming the real Redis broker."""

from contextlib import contextmanager

from celery.contrib.testing.worker import start_worker

from config.celery import app


@contextmanager
def live_worker(*, queues: list[str] | None = None):
    app.control.purge()  # messages left by earlier tests refer to rows that no longer exist
    with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False, shutdown_timeout=20,
                      loglevel="WARNING") as worker:
        yield worker
