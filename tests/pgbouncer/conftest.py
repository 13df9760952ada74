"""Fixtures of the PgBouncer tests: the platform's web and worker processes reach the test database only through a
real PgBouncer in transaction pooling (tests/pgbouncer/server.py), started and ended like the fault drills' processes
(tests/faults/processes.py)."""

import pytest
from django.db import connection

from tests.faults.conftest import private_redis, procs, pytest_runtest_makereport  # noqa: F401 - fixtures, log tails
from tests.faults.processes import Platform
from tests.pgbouncer.server import PgBouncer

WEB, WORKER = "pgb-web", "pgb-worker"  # application_name of each process's connections, as SHOW CLIENTS lists them


@pytest.fixture
def pgbouncer(procs, tmp_path) -> PgBouncer:  # noqa: F811 - procs is the imported fixture
    """PgBouncer in transaction pooling in front of this run's test database: 4 server connections for more clients,
    taken in turn, so consecutive transactions of one client run on different sessions."""
    s = connection.settings_dict
    bouncer = PgBouncer(tmp_path, database=s["NAME"], user=s["USER"], server_host=s["HOST"] or "127.0.0.1",
                        server_port=int(s["PORT"] or 5432), pool_size=4, round_robin=True)
    bouncer.wait_ready(procs.start("pgbouncer", bouncer.argv()).popen)
    return bouncer


@pytest.fixture
def platform(procs, private_redis, pgbouncer) -> Platform:  # noqa: F811
    """gunicorn (2 workers) and a Celery worker (threads pool), configured for transaction pooling, with persistent
    connections to PgBouncer; the test process itself uses the database directly."""
    through = {"DATABASE_POOLER": "pgbouncer-transaction", "CONN_MAX_AGE": 60}
    platform = Platform(procs, private_redis, DATABASE_URL=pgbouncer.url(application_name=WORKER), **through)
    platform.start_web(workers=2, extra_env={"DATABASE_URL": pgbouncer.url(application_name=WEB)})
    platform.start_worker()
    return platform
