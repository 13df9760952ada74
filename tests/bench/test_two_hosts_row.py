"""make bench's two-hosts row (bench/run.py, docs/performance.md "make bench") at a tiny size, run as `make bench`
runs it: the bench builds a database of its own, serves the one host, starts two hosts on 127.0.0.2 and 127.0.0.3
with HAProxy in front, and sends signed pay/create bodies through the proxy, each slice between two runs of the one
host's reference view. wrk and Debian's HAProxy are real; the database is dropped afterwards. What refuses a run
is checked on its own (a run that fails costs a whole set-up)."""

import re
import subprocess
import sys

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from bench.run import two_hosts_refusal
from tests.faults.conftest import private_redis, procs  # noqa: F401 - fixtures

pytestmark = [pytest.mark.faults]

ROW = re.escape("pay/create (two hosts behind HAProxy)")


def run_bench(redis_url: str, template: str | None) -> subprocess.CompletedProcess:
    """bench/run.py with the two-hosts row alone: 1 worker per host, 4 connections, one slice of 1 s; its database
    a copy of the suite's migrated template where there is one (xdist)."""
    s = connection.settings_dict
    postgres = f"postgres://{s['USER']}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}"
    database = f"{s['NAME']}_bench"
    try:
        return subprocess.run(
            [sys.executable, "bench/run.py", "--only", "pay/create (two", "--skip-callbacks", "--one-channel",
             "--workers", "2", "--connections", "4", "--duration", "1", "--slices", "1", "--merchants", "2",
             "--bodies", "1500", "--postgres", postgres, "--database", database, "--redis", redis_url,
             *(["--template", template] if template else [])],
            cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=600)
    finally:
        with psycopg.connect(f"{postgres}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def test_the_two_hosts_row_sends_signed_creates_through_haproxy_to_both_hosts(private_redis, request):  # noqa: F811
    from tests.support.xdist_databases import migrated_template

    run = run_bench(private_redis.url, migrated_template(request.config))
    assert run.returncode == 0, run.stderr[-3000:]
    row = re.search(rf"^\| {ROW} \| ([\d.]+) \| [\d.]+ \| [\d.]+ \| (\d+) \| ([\d.]+) \|", run.stdout, re.MULTILINE)
    assert row, run.stdout
    rate, errors, ratio = float(row[1]), int(row[2]), float(row[3])
    assert rate > 0 and errors == 0 and ratio > 0, row[0]
    spread = re.search(r"requests per host (\d+), (\d+)", run.stdout)
    assert spread and int(spread[1]) > 0 and int(spread[2]) > 0, run.stdout
    # The CPU table counts the two hosts' gunicorns and the bench's own HAProxy (by pid) for the row.
    cpu = re.search(rf"^\| {ROW} \| ([\d.]+) \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| ([\d.]+) \|", run.stdout,
                    re.MULTILINE)
    assert cpu and float(cpu[1]) > 0 and float(cpu[2]) > 0, run.stdout


def test_a_run_with_an_error_an_idle_host_or_a_missing_order_is_refused():
    both = {"host0": 60, "host1": 58}
    assert two_hosts_refusal({"requests": 118, "errors": 0}, both, made=118) == ""
    assert two_hosts_refusal({"requests": 118, "errors": 3}, both, made=118) == "3 errors"
    assert two_hosts_refusal({"requests": 118, "errors": 0}, {"host0": 118, "host1": 0}, made=118) == (
        "a host took no request ({'host0': 118, 'host1': 0})")
    assert two_hosts_refusal({"requests": 118, "errors": 0}, both, made=117) == "118 creates answered, 117 orders made"
