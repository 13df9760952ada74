"""DATABASE_REPLICA_URL: absent, no second alias and no router, every read on the primary (make run, the suite);
set, a `replica` alias with a short connect timeout and the router. Real subprocesses, real imports."""

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.test import Client

from apps.common.replica import PRIMARY, lag_tolerant, reads_from
from tests.portal.support import portal_login, portal_user

SHOW = ("from django.conf import settings as s; import json; r = s.DATABASES.get('replica') or {}; "
        "print(json.dumps({'aliases': sorted(s.DATABASES), 'routers': s.DATABASE_ROUTERS, "
        "'timeout': r.get('OPTIONS', {}).get('connect_timeout'), 'port': r.get('PORT'), "
        "'mirror': r.get('TEST', {}).get('MIRROR'), 'lag': s.DATABASE_REPLICA_MAX_LAG}))")


def shown(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DATABASE_REPLICA")}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.test", **extra)
    done = subprocess.run([sys.executable, "-c", f"import django; django.setup(); {SHOW}"], cwd=settings.BASE_DIR,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_without_a_replica_url_there_is_no_second_alias_and_no_router():
    assert shown() == {"aliases": ["default"], "routers": [], "timeout": None, "port": None, "mirror": None,
                       "lag": 5.0}


def test_a_replica_url_adds_the_alias_with_a_short_connect_timeout_and_the_router():
    assert shown(DATABASE_REPLICA_URL="postgres://reader@10.0.0.9:5433/payments", DATABASE_REPLICA_MAX_LAG="2.5") == {
        "aliases": ["default", "replica"], "routers": ["apps.common.replica.ReplicaRouter"], "timeout": 2,
        "port": 5433, "mirror": "default", "lag": 2.5}


def test_a_replica_url_that_is_not_postgres_refuses_to_start():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "DATABASE_REPLICA_URL": "sqlite:///x.db"}
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=settings.BASE_DIR, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "DATABASE_REPLICA_URL must be a postgres:// URL" in done.stderr


@pytest.mark.django_db
def test_without_a_replica_pages_read_the_primary_and_say_no_as_of(merchant):
    assert reads_from() is PRIMARY
    assert lag_tolerant(lambda reads: reads) is PRIMARY
    page = portal_login(Client(), portal_user(merchant.merchant, "finance")).get("/portal/payins/")
    assert page.status_code == 200 and 'id="portal-as-of"' not in page.content.decode()
