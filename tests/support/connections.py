"""A kept database connection as served (CONN_MAX_AGE > 0), for tests of what a request's first statement does on it
(docs/faults.md, drill 3; apps/common/connection_check.py)."""

import psycopg
from django.db import connection


def request_starts() -> None:
    """What Django does for every connection when a request starts (the test client skips it)."""
    connection.close_if_unusable_or_obsolete()


def kill_backend() -> int:
    """Terminate this connection's server process from another connection, as a failover or an operator would; the
    kept connection does not know until it is used. Returns the dead backend's pid."""
    dead_pid = connection.connection.info.backend_pid
    db = connection.settings_dict
    with psycopg.connect(dbname=db["NAME"], user=db["USER"], host=db["HOST"], port=db["PORT"] or None,
                         password=db["PASSWORD"] or None, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", [dead_pid]).fetchone()[0]
    return dead_pid
