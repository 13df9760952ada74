"""DATABASE_POOLER: how a deployment tells the settings that PgBouncer pools its connections per transaction."""

import os
import subprocess
import sys

from django.conf import settings

PRINT_SETTING = "from django.conf import settings; print(settings.DATABASES['default']['DISABLE_SERVER_SIDE_CURSORS'])"


def settings_with(pooler: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_POOLER"}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    if pooler is not None:
        env["DATABASE_POOLER"] = pooler
    return subprocess.run([sys.executable, "-c", PRINT_SETTING], cwd=settings.BASE_DIR, env=env, capture_output=True,
                          text=True, timeout=60)


def test_pgbouncer_transaction_pooling_disables_server_side_cursors():
    assert settings_with("pgbouncer-transaction").stdout.strip() == "True"


def test_without_a_pooler_server_side_cursors_stay_on():
    assert settings_with(None).stdout.strip() == "False"
    assert settings_with("").stdout.strip() == "False"


def test_an_unknown_pooler_refuses_to_start():
    done = settings_with("pgbouncer-session")
    assert done.returncode != 0 and "DATABASE_POOLER must be empty or pgbouncer-transaction" in done.stderr
