"""pytest-xdist: the test database is migrated once, by the controller, and cloned for each worker.

pytest-django alone has every worker migrate its own test_<name>_gwN from scratch: with 3 workers on 2 cores, three
copies of the whole migration history running side by side (100 s of setup each on a busy machine). Here the
controller (which runs no test) creates test_<name> with the migrations, as pytest-django would, copies it with
`CREATE DATABASE test_<name>_gwN TEMPLATE test_<name>` (Django's clone_test_db, what `manage.py test --parallel`
does), and keeps the template, unused, for the soak (tests/soak/test_soak.py copies it for each of its deployments
instead of migrating two databases from scratch). Each worker is told so (workerinput) and opens its copy as
pytest-django's --reuse-db would: `migrate` finds nothing to apply. The controller drops the copies and the template
when the run ends. See docs/testing.md.
"""

import re

WORKERINPUT_KEY = "cloned_test_database"
TEMPLATE_KEY = "migrated_template_database"  # workerinput: the name of the migrated template, kept to the end


def numprocesses(config) -> int:
    """How many xdist workers this run starts (0: none, the suite runs in this process)."""
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return 0
    return int(getattr(config.option, "numprocesses", 0) or 0)


def _unblocked(config):
    from pytest_django.plugin import blocking_manager_key

    return config.stash[blocking_manager_key].unblock()


def prepare(config, workers: int) -> str:
    """Migrate test_<name> once, clone it for gw0..gw<workers-1>; returns its name (the template, dropped by
    drop_clones at the end; nothing connects to it meanwhile but a copy being made)."""
    from django.db import connection

    creation = connection.creation
    with _unblocked(config):
        base_name = connection.settings_dict["NAME"]
        creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        suffixes = [f"gw{n}" for n in range(workers)]
        for suffix in suffixes:
            creation.clone_test_db(suffix=suffix, verbosity=0, autoclobber=True)
        template = connection.settings_dict["NAME"]
        # Kept (keepdb): closes the connection (a copy is made only of a database nobody is connected to) and puts
        # the settings' name back, as dropping it would.
        creation.destroy_test_db(base_name, verbosity=0, keepdb=True)
    return template


def drop_clones(config) -> None:
    """Drop test_<name>_gwN, every N (a worker xdist restarted has a new N and made its own): the workers kept
    theirs (reuse-db), as they may end before their last connection does; and the template test_<name>."""
    from django.db import connection

    pattern = re.compile(re.escape(connection.creation._get_test_db_name()) + r"(_gw\d+)?")
    with _unblocked(config), connection.creation._nodb_cursor() as cursor:
        cursor.execute("SELECT datname FROM pg_database")
        for (name,) in cursor.fetchall():
            if pattern.fullmatch(name):
                cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(name)} WITH (FORCE)")


def worker_uses_a_clone(config) -> bool:
    return bool(getattr(config, "workerinput", {}).get(WORKERINPUT_KEY))


def configure_node(node, template: str) -> None:
    node.workerinput[WORKERINPUT_KEY] = True
    node.workerinput[TEMPLATE_KEY] = template


def migrated_template(config) -> str | None:
    """In an xdist worker whose database the controller cloned: the migrated template it was cloned from."""
    return getattr(config, "workerinput", {}).get(TEMPLATE_KEY)

