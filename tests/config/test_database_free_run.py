"""A pytest run of database-free tests sets up no test database, and its connection then names the configured one:
the database a developer's `make run` serves from. The suite's session fixtures must leave that database alone."""

import os
import secrets
import subprocess
import sys
from urllib.parse import urlsplit

import psycopg
from django.conf import settings


def test_a_database_free_run_neither_alters_the_configured_database_nor_ends_its_sessions():
    url = urlsplit(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/payments"))
    server, name = f"{url.scheme}://{url.netloc}", f"free_run_{secrets.token_hex(4)}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(f"{server}/{name}", autocommit=True) as served:  # as make run's web holds one
            env = {**os.environ, "DATABASE_URL": f"{server}/{name}", "DJANGO_SETTINGS_MODULE": "config.settings.test"}
            env.pop("PYTEST_XDIST_WORKER", None)
            env.pop("LOG_LEAK_PROBE", None)  # the probe skips: a session with no test that uses the database
            result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", "-p", "no:cacheprovider",
                                     "tests/support/log_leak_probe.py"], env=env, capture_output=True, text=True,
                                    timeout=120, cwd=settings.BASE_DIR, check=False)
            assert result.returncode == 0 and "1 skipped" in result.stdout, result.stdout[-3000:]
            assert served.execute("SELECT 1").fetchone() == (1,)  # its session was not terminated
            altered = served.execute("SELECT count(*) FROM pg_db_role_setting s JOIN pg_database d "
                                     "ON d.oid = s.setdatabase WHERE d.datname = %s", [name]).fetchone()[0]
            assert altered == 0  # no ALTER DATABASE ... SET
            tables = served.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'common_auditlog%'").fetchone()
            assert tables == (0,)  # no partition made in it
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
