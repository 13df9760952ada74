"""Settings fail closed: a process started without DJANGO_SETTINGS_MODULE (manage.py, the WSGI server, a
Celery worker) gets production settings, never the development defaults, and those refuse to start without their
variables; X-Forwarded-Proto is believed only when told a proxy is in front. Real subprocesses, real imports."""

import json
import os
import re
import subprocess
import sys

import pytest
from django.conf import settings

ROOT = settings.BASE_DIR
PRODUCTION_VARIABLES = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY", "PLATFORM_KEY_ENCRYPTION_KEY",
                        "ALLOWED_HOSTS")
PRODUCTION_ENV = {"DATABASE_URL": "postgres://app@db.invalid:5432/payments",
                  "REDIS_URL": "redis://redis.invalid:6379/0",
                  "CELERY_BROKER_URL": "amqp://app:secret@rabbitmq.invalid:5672/payments", "SECRET_KEY": "s" * 50,
                  "PLATFORM_KEY_ENCRYPTION_KEY": "k" * 44, "ALLOWED_HOSTS": "pay.example.com"}
SHOW = ("from django.conf import settings as s; import json; print(json.dumps({'DEBUG': s.DEBUG, "
        "'private_hosts': s.CALLBACK_ALLOW_PRIVATE_HOSTS, 'secret': s.SECRET_KEY, "
        "'proxy': s.SECURE_PROXY_SSL_HEADER, 'axes_proxy_count': s.AXES_IPWARE_PROXY_COUNT, "
        "'module': s.SETTINGS_MODULE}))")


def bare_environment(**extra: str) -> dict:
    """This process's environment without any settings module or variable a settings file reads by default."""
    drop = {"DJANGO_SETTINGS_MODULE", "DEBUG", "BEHIND_PROXY", "CALLBACK_ALLOW_PRIVATE_HOSTS", *PRODUCTION_VARIABLES}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def run(*argv: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("argv", [
    ["-c", "import config.wsgi"],
    ["-c", f"import config.celery; {SHOW}"],
], ids=["wsgi", "celery"])
def test_without_a_settings_module_or_variables_a_process_refuses_to_start(argv):
    result = run(*argv, env=bare_environment())
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    message = re.search(r"config\.settings\.production needs ([A-Z_, ]+) in the environment", result.stderr)
    assert message, result.stderr[-2000:]
    assert set(message.group(1).split(", ")) == set(PRODUCTION_VARIABLES)
    assert "DJANGO_SETTINGS_MODULE=config.settings.local" in result.stderr  # and how to develop instead


@pytest.mark.parametrize("settings_module", [None, "config.settings.local"], ids=["no settings module", "local"])
def test_manage_py_with_no_make_run_running_says_how_to_start_it_instead_of_a_traceback(tmp_path, settings_module):
    """No DATABASE_URL and this checkout's embedded PostgreSQL not running (an empty data directory here): nothing
    could be reached. manage.py says so, how to start it and which variables to set, runs nothing, exits 1."""
    extra = {"EMBEDDED_PGDATA": str(tmp_path)}
    if settings_module:
        extra["DJANGO_SETTINGS_MODULE"] = settings_module
    result = run("manage.py", "createsuperuser", "--noinput", "--username", "x", env=bare_environment(**extra))
    assert result.returncode == 1
    assert result.stdout == ""
    assert "Traceback" not in result.stderr and "ImproperlyConfigured" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.startswith("manage.py: the development database is not running. Start it with `make run`")
    for variable in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE=config.settings.local"):
        assert variable in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing started or written


@pytest.mark.parametrize("entry", ["import config.wsgi", "import config.celery"], ids=["wsgi", "celery"])
def test_without_a_settings_module_a_process_gets_production_settings_not_development(entry):
    result = run("-c", f"{entry}; {SHOW}", env=bare_environment(DEBUG="true", **PRODUCTION_ENV))
    assert result.returncode == 0, result.stderr[-2000:]
    shown = json.loads(result.stdout.strip().splitlines()[-1])
    assert shown["module"] == "config.settings.production"
    assert shown["DEBUG"] is False  # DEBUG=true in the environment does not turn it on
    assert shown["private_hosts"] is False
    assert shown["secret"] == PRODUCTION_ENV["SECRET_KEY"] and "dev-only" not in shown["secret"]
    assert shown["proxy"] is None  # no proxy said to be in front: X-Forwarded-Proto is not believed


def test_manage_py_without_a_settings_module_runs_production_settings():
    result = run("manage.py", "diffsettings", "--all", env=bare_environment(**PRODUCTION_ENV))
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(r"^(### )?DEBUG = False$", result.stdout, re.M), result.stdout[:3000]
    assert re.search(r"^CALLBACK_ALLOW_PRIVATE_HOSTS = False(  ###)?$", result.stdout, re.M)
    assert re.search(r"^SETTINGS_MODULE = .config.settings.production.", result.stdout, re.M)


@pytest.mark.parametrize("missing", ["DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"])
def test_production_settings_require_the_database_redis_and_the_broker(missing):
    env = bare_environment(DJANGO_SETTINGS_MODULE="config.settings.production",
                           **{k: v for k, v in PRODUCTION_ENV.items() if k != missing})
    result = run("-c", SHOW, env=env)
    assert result.returncode != 0
    assert f"config.settings.production needs {missing} in the environment" in result.stderr, result.stderr[-2000:]


def test_the_forwarded_scheme_and_address_are_believed_only_behind_a_proxy():
    env = bare_environment(DJANGO_SETTINGS_MODULE="config.settings.production", BEHIND_PROXY="true", **PRODUCTION_ENV)
    result = run("-c", SHOW, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    shown = json.loads(result.stdout.strip().splitlines()[-1])
    assert shown["proxy"] == ["HTTP_X_FORWARDED_PROTO", "https"] and shown["axes_proxy_count"] == 1


def test_development_settings_are_chosen_explicitly_by_what_runs_them():
    procfile = (ROOT / "Procfile").read_text().splitlines()
    assert procfile and all("DJANGO_SETTINGS_MODULE=config.settings.local " in line for line in procfile if line)
    makefile = (ROOT / "Makefile").read_text()
    assert "run serve migrate bootstrap: export DJANGO_SETTINGS_MODULE = config.settings.local" in makefile
    assert "test faults lint: export DJANGO_SETTINGS_MODULE = config.settings.test" in makefile
    assert "DJANGO_SETTINGS_MODULE=config.settings.production" in (ROOT / "Dockerfile").read_text()
    assert "DJANGO_SETTINGS_MODULE: config.settings.production" in (ROOT / "docker-compose.yml").read_text()
    for entry in ["config/wsgi.py", "config/celery.py"]:  # manage.py: the test below
        source = (ROOT / entry).read_text()
        assert '"config.settings.local"' not in source, entry
        assert 'setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")' in source, entry


def test_manage_py_takes_development_settings_only_beside_a_running_make_run(tmp_path):
    """make run's second terminal (docs/development.md): this checkout's embedded PostgreSQL is running and no DATABASE_URL is set,
    so `manage.py` takes the development settings; with a DATABASE_URL it is production settings again, and with a
    postmaster.pid of a process that is gone it says that the development database is not running."""
    show = ["manage.py", "shell", "-c", SHOW]
    (tmp_path / "postmaster.pid").write_text(f"{os.getpid()}\n{tmp_path}\n0\n5432\n{tmp_path}\n")
    beside = run(*show, env=bare_environment(EMBEDDED_PGDATA=str(tmp_path)))
    assert beside.returncode == 0, beside.stderr[-2000:]
    assert json.loads(beside.stdout.strip().splitlines()[-1])["module"] == "config.settings.local"

    with_url = run(*show, env=bare_environment(EMBEDDED_PGDATA=str(tmp_path), DATABASE_URL="postgres://x@y/z"))
    assert with_url.returncode != 0 and "config.settings.production needs" in with_url.stderr

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "postmaster.pid").write_text(f"{gone.stdout.strip()}\n{tmp_path}\n0\n5432\n{tmp_path}\n")
    stale = run(*show, env=bare_environment(EMBEDDED_PGDATA=str(tmp_path)))
    assert stale.returncode == 1 and "the development database is not running" in stale.stderr
