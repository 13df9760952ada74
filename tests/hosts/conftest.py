"""Fixtures of the several-hosts tests: hosts on their own loopback addresses (each its gunicorn, Celery worker and
beat), one HAProxy spreading requests over them, and PgBouncer in transaction pooling between every host and the
test's database; a private redis-server is the broker and the cache they share (docs/deployment.md)."""

import pytest
from django.db import connection

from tests.faults.conftest import private_redis, procs, pytest_runtest_makereport  # noqa: F401 - fixtures, log tails
from tests.faults.processes import Platform, Proc, Processes
from tests.pgbouncer.server import PgBouncer
from tests.support.receiver import CallbackReceiver


class Host:
    """One host: gunicorn, a Celery worker and a beat on one loopback address; killed whole and started again."""

    def __init__(self, platform: Platform, name: str):
        self.platform, self.name = platform, name
        self.processes: list[Proc] = []

    def start(self, *, database_url: str) -> "Host":
        """The worker boots while gunicorn does (on two cores, a host's start-up is mostly Django's)."""
        worker = self.platform.start_worker(concurrency=8, wait=False)
        web = self.platform.start_web(workers=2, extra_env={"DATABASE_URL": database_url})
        beat = self.platform.start_beat()
        worker.wait_for_log(" ready.", timeout=self.platform.ready_timeout)
        self.processes = [web, worker, beat]
        return self

    def kill(self) -> None:
        """SIGKILL to every process group of the host at once: a machine that lost its power."""
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.popen.wait(timeout=10)


@pytest.fixture
def bouncer(procs: Processes, tmp_path) -> PgBouncer:  # noqa: F811 - procs is the imported fixture
    s = connection.settings_dict
    bouncer = PgBouncer(tmp_path, database=s["NAME"], user=s["USER"], server_host=s["HOST"] or "127.0.0.1",
                        server_port=int(s["PORT"] or 5432), pool_size=8)
    bouncer.wait_ready(procs.start("pgbouncer", bouncer.argv()).popen)
    return bouncer


@pytest.fixture
def receiver() -> CallbackReceiver:
    """The merchants' callback endpoint, a real HTTP server on 127.0.0.1 (keep-alive, as most merchants' are)."""
    server = CallbackReceiver(keep_alive=True).start()
    yield server
    server.stop()
