import re
from datetime import UTC, datetime

import pytest
from dateutil.relativedelta import relativedelta
from django.core.management import call_command

from apps.common import signing
from apps.merchants.services import merchant_create
from tests.helpers import MerchantCtx


@pytest.fixture(scope="session")
def rsa_keys():
    """A few real 2048-bit key pairs, generated once per run."""
    return [signing.generate_private_key() for _ in range(3)]


@pytest.fixture(scope="session")
def bootstrap_platform_key():
    """The platform key bootstrap makes, generated once per run (a real RSA-2048 key, like rsa_keys)."""
    return signing.generate_private_key()


@pytest.fixture(scope="session")
def _bootstrap_rows():
    from tests.support.bootstrap_rows import BootstrapRows

    return BootstrapRows()


@pytest.fixture
def bootstrap_command(bootstrap_platform_key):
    """`manage.py bootstrap` as the suite runs it. The database starts empty in every test, so it makes platform key
    version 1 each time: 50 ms of RSA generation. It takes the run's key instead; keys made later (rotations) are
    generated anew."""

    return lambda: bootstrap_with(bootstrap_platform_key)


def bootstrap_with(platform_key) -> None:
    """`manage.py bootstrap`, its platform key version 1 the given one (bootstrap_command)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(signing, "generate_private_key", lambda bits=2048: platform_key)
        call_command("bootstrap", stdout=open("/dev/null", "w"))


@pytest.fixture
def bootstrapped(db, bootstrap_command, _bootstrap_rows):
    """What `manage.py bootstrap` writes into the test's empty database: the command's first run in this process, then
    its rows put back (tests/support/bootstrap_rows.py: the same rows through the same triggers, in two round trips)."""
    if not _bootstrap_rows.put_back():
        _bootstrap_rows.run(bootstrap_command)


def make_merchant(private_key, *, name="Acme", currencies=("PHP",), collection_callback_url="",
                  payout_callback_url="") -> MerchantCtx:
    created = merchant_create(
        name=name,
        public_key_pem=signing.public_key_to_pem(private_key.public_key()),
        currencies=list(currencies),
        collection_callback_url=collection_callback_url,
        payout_callback_url=payout_callback_url,
    )
    return MerchantCtx(created.merchant.merchant_no, created.app.app_id, created.key.version, private_key,
                       merchant=created.merchant)


@pytest.fixture
def merchant(bootstrapped, rsa_keys) -> MerchantCtx:
    return make_merchant(rsa_keys[0], currencies=("PHP", "USD"))


@pytest.fixture
def other_merchant(bootstrapped, rsa_keys) -> MerchantCtx:
    return make_merchant(rsa_keys[1], name="Other Co", currencies=("PHP",))


def _end_history_context(**kwargs):
    from django.db import Error, connection

    if connection.in_atomic_block and not connection.needs_rollback:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('pghistory.context_id', '', true), "
                               "set_config('pghistory.context_metadata', '', true)")
        except Error:  # a test that takes the database away (healthz): nothing to end
            pass


@pytest.fixture(autouse=True)
def _admin_request_context_ends_with_the_request():
    """In production an admin request's settings-trail context (pghistory, transaction-local) ends with the request's
    transaction; a test runs every request inside its own one transaction, where it would stay attached to whatever
    the test writes next (a second staff account would look made by the first request's user)."""
    from django.core.signals import request_finished

    request_finished.connect(_end_history_context)
    yield
    request_finished.disconnect(_end_history_context)


@pytest.fixture(autouse=True)
def _clear_cache():
    """Nonces and rate counters live in Redis; each test starts with none."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture(autouse=True)
def _ledger_invariants_hold(request):
    """After every test that touched the database, every ledger invariant must still hold."""
    uses_db = request.node.get_closest_marker("django_db") or {"db", "transactional_db"} & set(request.fixturenames)
    if not uses_db:
        yield
        return
    request.getfixturevalue("_django_db_helper")  # set up before, so torn down after, this check
    yield
    ledger_check(request.node)


def ledger_check(item) -> None:
    """Every ledger invariant holds after the test; on a test marked `ledger_tampered`, the ledger must be broken
    (so a tampering test that tampers nothing fails)."""
    from apps.ledger.selectors import ledger_verify

    report = ledger_verify()
    if ledger_tampered(item):
        assert report["ok"] is False, "marked ledger_tampered, but every ledger invariant still holds"
        return
    assert report["ok"], report["failures"]


def ledger_tampered(item) -> bool:
    """The marker on the test function itself only: a module's `pytestmark` or a class's marker does not excuse
    every test under it from the ledger check (get_closest_marker would pick those up)."""
    return any(mark.name == "ledger_tampered" for mark in item.own_markers)


@pytest.fixture
def callback_receiver():
    """A real HTTP server on 127.0.0.1 that records callbacks; scripted replies (tests/support/receiver.py)."""
    from tests.support.receiver import CallbackReceiver

    receiver = CallbackReceiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture
def live_celery_worker(transactional_db):
    """A real Celery worker thread on the test Redis broker; use with transactional_db tests."""
    from tests.support.worker import live_worker

    with live_worker() as worker:
        yield worker


# --- pytest-xdist: what must stay in one worker (docs/testing.md, "Parallel") ------------------------------------

@pytest.hookimpl(tryfirst=True)  # before xdist's own, which turns the marks into the nodeid suffix it schedules by
def pytest_collection_modifyitems(config, items):
    """`make test` runs the suite in xdist workers, `--dist loadgroup`: a test goes to any free worker, except
    - the fault drills (tests/faults), kept whole: one worker runs them one after another, as `make faults` does.
      Each starts its own gunicorn, Celery worker and redis-server and kills some of them on a timetable; two at a
      time would double that load on a 2-core machine and each other's timing; the same for tests/hosts (several
      hosts' processes, beats started twice);
    - a module whose tests share a module-scoped fixture (a Chromium, a generated key): one worker runs it, so the
      fixture is made once, not once per worker; except test data built once per module (BUILT_ONCE_PER_WORKER, a
      build of seconds): its tests are spread like any others, and each worker builds it for its share.
    Groups are sent out largest first (xdist's loadscopereorder), so the drills start at once."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    # In a worker (where the suffix matters: the controller schedules by the ids workers collect) xdist has set
    # `dist` to "no" and says loadgroup in `option.loadgroup`; checking `dist` alone left every test ungrouped (the
    # drills ran side by side on all workers, module-scoped fixtures were made in each).
    loadgroup = getattr(config.option, "loadgroup", False) or config.getoption("dist", default=None) == "loadgroup"
    for item in items:
        nodeid, group = _unique_nodeid(item), _xdist_group(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
            if loadgroup:
                nodeid += f"@{group}"  # what xdist's loadgroup schedules by; its own suffix is lost on pytest 9.2
        if nodeid != item.nodeid:
            _set_nodeid(item, nodeid)


# Tests that take minutes by themselves: in an xdist worker they are collected first, so they start at once instead
# of after everything else and leave one worker running them alone at the end (the model test: ~100 s alone; the
# 90-second soak: about 4 minutes of wall time with its set-up and quiet period). The drills are not among them: with
# the soak, the drills and the model test all started at second 0 (docs/performance.md, "Suite") the three fought
# for the 2 cores and a clean-clone `make test` took 1,161 s, against 895 s with this order on the same machine
# (docs/performance.md, "Suite").
START_FIRST = ("tests/model/", "tests/soak/")


class _StartFirst:
    """Registered in an xdist worker only (pytest_configure): a serial run keeps pytest-django's order."""

    @pytest.hookimpl(trylast=True)  # after pytest-django's ordering (database tests, then transactional ones)
    def pytest_collection_modifyitems(self, items):
        items.sort(key=lambda item: not item.nodeid.startswith(START_FIRST))  # stable: the rest keep their order


def _unique_nodeid(item) -> str:
    """Schemathesis collects one item per API operation, all with the same nodeid (`...::test_every_response_is_a_
    contract_envelope`; the operation is only in the name). xdist schedules by nodeid: of 9 such items one ran and
    8 were silently lost. The nodeid takes the name, `...::test_every_response_is_a_contract_envelope[GET
    /currencies]`, as for a parametrized test."""
    head, _, last = item.nodeid.rpartition("::")
    if head and last != item.name and item.name.startswith(last + "["):
        return f"{head}::{item.name}"
    return item.nodeid


def _set_nodeid(item, nodeid: str) -> None:
    """pytest 9.2 keeps a node's id in `_id`, a NodeId (xdist 3.8 still writes `_nodeid`, which it no longer reads:
    that is why xdist's own `@group` suffix is lost); older pytest in `_nodeid`."""
    if hasattr(item, "_id"):
        from _pytest.nodeid import coerce_node_id

        item._id = coerce_node_id(nodeid)
    item._nodeid = nodeid


def _xdist_group(item) -> str | None:
    path = item.nodeid.split("::")[0]
    if path.startswith("tests/faults/test_rabbitmq"):
        # The RabbitMQ drills (about 5 minutes) beside the others (about 6), not after them: a private node or vhost
        # of their own, so the two chains share nothing but the cores.
        return "faults-rabbitmq"
    if path.startswith("tests/faults/"):
        return "faults"
    if path.startswith("tests/hosts/"):
        return "hosts"  # several hosts' processes at once: one worker runs them one after another, as the drills
    if getattr(getattr(item, "module", None), "BUILT_ONCE_PER_WORKER", False):
        return None  # its module fixture is test data built in seconds (tests/support/built_once.py): spread the tests
    fixtures = getattr(item, "_fixtureinfo", None)
    definitions = fixtures.name2fixturedefs.values() if fixtures else ()
    if any(defs and defs[-1].scope == "module" for defs in definitions):
        return path
    return None


def pytest_sessionstart(session):
    """pytest-xdist, in the controller, before the workers start: one migrated database, a copy for each worker
    (tests/support/xdist_databases.py). Not with --reuse-db: the workers keep and reuse their own, as pytest-django
    does."""
    from tests.support import xdist_databases

    workers = xdist_databases.numprocesses(session.config)
    if workers and not session.config.getvalue("reuse_db"):
        session.config.stash[_TEMPLATE] = xdist_databases.prepare(session.config, workers)
        session.config.stash[_CLONED] = True


_CLONED = pytest.StashKey[bool]()
_TEMPLATE = pytest.StashKey[str]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    from tests.support import xdist_databases

    if node.config.stash.get(_CLONED, False):
        xdist_databases.configure_node(node, node.config.stash[_TEMPLATE])


@pytest.fixture(scope="session")
def django_db_keepdb(request):
    """pytest-django's --reuse-db; and in an xdist worker whose database the controller cloned: open it, keep it
    (the controller drops it)."""
    from tests.support import xdist_databases

    return bool(request.config.getvalue("reuse_db")) or xdist_databases.worker_uses_a_clone(request.config)


# --- no secret or private key in any log line of the suite (tests/support/log_guard.py) -------------------------

def pytest_configure(config):
    if hasattr(config, "workerinput"):
        config.pluginmanager.register(_StartFirst(), "start-first")
    from tests.support import flush

    flush.install()  # a transactional test's flush keeps post_migrate's rows when unchanged (tests/support/flush.py)
    from tests.support import log_guard

    log_guard.install()  # every log record of the session, from here on


@pytest.fixture(scope="session", autouse=True)
def _log_secret_sources():
    from tests.support import log_guard

    log_guard.watch_secret_sources()
    yield


_WORKER_FINDINGS: list[str] = []  # under pytest-xdist, in the controller: what the workers' session checks found


@pytest.hookimpl(trylast=True)  # after session fixtures (live workers, servers) have shut down and logged
def pytest_sessionfinish(session, exitstatus):
    from tests.support import log_guard

    if session.config.stash.get(_CLONED, False):
        from tests.support import xdist_databases

        xdist_databases.drop_clones(session.config)
    findings = [finding.redacted() for finding in log_guard.session_findings()]
    if hasattr(session.config, "workeroutput"):
        # An xdist worker: its exit status and terminal are not the run's. The controller reports what it found.
        session.config.workeroutput["log_guard_findings"] = findings
        return
    findings += _WORKER_FINDINGS
    if not findings:
        return
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_sep("=", f"{len(findings)} log line(s) carry a secret", red=True)
        for finding in findings[:50]:
            reporter.write_line(finding)


@pytest.hookimpl(optionalhook=True)  # the hook exists only with xdist loaded (not under -p no:xdist)
def pytest_testnodedown(node, error):
    """pytest-xdist, in the controller: a worker is done; keep what its session check found (see above)."""
    _WORKER_FINDINGS.extend(getattr(node, "workeroutput", {}).get("log_guard_findings", []))


@pytest.fixture(scope="session", autouse=True)
def _no_stray_sessions_on_the_test_database(django_db_setup, django_db_blocker):
    """Threads of live workers and servers can leave a connection open at the end of the run, and PostgreSQL then
    refuses to drop the test database. End those sessions first (torn down before django_db_setup drops it).

    Before the tests: the test database commits without waiting for its WAL to reach the disk (`synchronous_commit
    off`, for every session on it: this process's, its threads' and the processes tests start). Only a crash of the
    PostgreSQL server could lose the last commits, and no test crashes the server (the drills kill backends, which
    loses nothing committed); what each session sees and locks is unchanged. The suite commits tens of thousands of
    times (transactional tests, live workers, the drills' processes), each a disk flush otherwise."""
    from django.db import connection

    # A run of database-free tests only sets up no test database: the connection then names the configured one (a
    # developer's, which a running `make run` uses), which must be neither altered nor emptied of its sessions.
    on_a_test_database = connection.vendor == "postgresql" and connection.settings_dict["NAME"].startswith("test_")
    if on_a_test_database:
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute(f"ALTER DATABASE {connection.ops.quote_name(connection.settings_dict['NAME'])} "
                           "SET synchronous_commit TO off")
            cursor.execute("SET synchronous_commit TO off")  # this session (the setting applies to new ones)
        with django_db_blocker.unblock():
            _partitions_for_the_suite()
    yield
    if on_a_test_database:
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")


# Tests travel in time (the callbacks' clock is in March 2026, the settlement's in 2025): the partitioned tables get
# their months from here to the months ahead of now, as beat would have made them.
SUITE_FIRST_MONTH = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture
def far_months(transactional_db):
    """Months far from the suite's (2038 to 2049, which no other test writes in), of every partitioned table: dropped
    again at the end, so a retention test sees only its own."""
    from django.db import connection

    yield
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid")
        for (name,) in cursor.fetchall():
            if re.search(r"_20(3[89]|4\d)_[a-z]{3}$", name):
                cursor.execute(f'DROP TABLE "{name}"')


def _partitions_for_the_suite() -> None:
    from django.conf import settings
    from django.utils import timezone

    from apps.common.partitions import partitions_create

    month = SUITE_FIRST_MONTH
    while month <= timezone.now():
        partitions_create(now=month)
        month += relativedelta(months=settings.PARTITIONS_AHEAD_MONTHS + 1)
    partitions_create()


@pytest.fixture
def admin_client(db, admin_user):
    """pytest-django's admin_client, with the second factor every admin session needs (tests/support/staff.py)."""
    from django.test import Client

    from tests.support.staff import admin_login

    return admin_login(Client(), admin_user)


@pytest.fixture
def persistent_connection(monkeypatch):
    """The connection as served (CONN_MAX_AGE > 0): kept across requests, health-checked once per request
    (tests/support/connections.py)."""
    from django.db import connection

    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 600)
    connection.close()
    yield
    connection.close()
