"""Fixtures of the replica tests: a real primary and streaming replica (tests/replica/server.py), one pair per module,
and for each test a fresh database on it that this process's `default` alias and a `replica` alias point at, with
the platform's router (config/settings/base.py does the same from DATABASE_REPLICA_URL)."""

import itertools

import pytest
from django.db import connections

from apps.common.replica import REPLICA, replica_health_forget
from tests.conftest import ledger_check
from tests.replica.server import StreamingPair

_databases = itertools.count(1)


@pytest.fixture(scope="module")
def pair(django_db_setup, django_db_blocker) -> StreamingPair:
    """The pair, and the `replica` alias on its standby for the module's tests (which name it in their
    `django_db(databases=...)`; a mirror of `default`, so no test flushes it)."""
    with django_db_blocker.unblock():
        default = connections["default"].settings_dict
    pair = StreamingPair().start(source_database=default["NAME"])
    connections.settings[REPLICA] = {
        **default, "HOST": "127.0.0.1", "PORT": str(pair.replica.port),
        "TEST": {**default["TEST"], "MIRROR": "default"},
        "OPTIONS": {**default["OPTIONS"], "connect_timeout": 2}}
    yield pair
    connections[REPLICA].close()
    del connections[REPLICA]
    del connections.settings[REPLICA]
    pair.stop()


@pytest.fixture
def on_pair(transactional_db, pair, settings, request):
    """This test's database on the pair: `default` on the primary, `replica` on the standby; the replica is running
    and replaying, and each process-wide health decision is forgotten before and after."""
    if not pair.replica.running():
        pair.replica.start()
    pair.resume_replay()
    name = f"replica_test_{next(_databases)}"
    pair.new_database(name)
    default = connections["default"]
    saved = dict(default.settings_dict)
    default.close()
    default.settings_dict.update(HOST="127.0.0.1", PORT=str(pair.primary.port), NAME=name)
    connections[REPLICA].close()
    connections.settings[REPLICA]["NAME"] = name
    settings.DATABASE_ROUTERS = ["apps.common.replica.ReplicaRouter"]
    settings.DATABASE_REPLICA_CHECK_INTERVAL = 60  # decisions change when a test says so (replica_health_forget)
    replica_health_forget()
    yield pair
    replica_health_forget()
    try:
        if not getattr(request.node, "rep_call", None) or request.node.rep_call.passed:
            ledger_check(request.node)  # on this test's database, before default points back at the suite's
    finally:
        connections[REPLICA].close()
        default.close()
        default.settings_dict.clear()
        default.settings_dict.update(saved)
        if pair.replica.running():
            pair.resume_replay()
        pair.drop_database(name)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.rep_call = report
    return report
