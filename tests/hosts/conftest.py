"""Fixtures of the several-hosts tests: hosts on their own loopback addresses (each its gunicorn, Celery worker and
beat), one HAProxy spreading requests over them, and PgBouncer in transaction pooling between every host and the
test's database; a private redis-server is the broker and the cache they share (docs/deployment.md;
tests/support/hosts.py, which the soak's several-hosts deployment uses too)."""

import pytest

from tests.faults.conftest import private_redis, procs, pytest_runtest_makereport  # noqa: F401 - fixtures, log tails
from tests.faults.processes import Processes
from tests.pgbouncer.server import PgBouncer
from tests.support.hosts import bouncer_start
from tests.support.receiver import CallbackReceiver


@pytest.fixture
def bouncer(procs: Processes, tmp_path) -> PgBouncer:  # noqa: F811 - procs is the imported fixture
    return bouncer_start(procs, tmp_path, pool_size=8)


@pytest.fixture
def receiver() -> CallbackReceiver:
    """The merchants' callback endpoint, a real HTTP server on 127.0.0.1 (keep-alive, as most merchants' are)."""
    server = CallbackReceiver(keep_alive=True).start()
    yield server
    server.stop()
