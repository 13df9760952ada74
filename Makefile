# The two commands of the README: `make run` and `make test`. Everything they need is installed here.
SHELL := /bin/bash
UV := $(shell command -v uv 2>/dev/null || echo uv)
export UV_LINK_MODE ?= copy
# Python's bytecode caches (__pycache__, ignored by git) are written even where the environment sets
# PYTHONDONTWRITEBYTECODE: without them every process that make starts compiles its ~1,400 modules again, and a
# Django start-up takes 4 s of CPU instead of 1.6 (docs/performance.md, "Start-up").
unexport PYTHONDONTWRITEBYTECODE
# uv compiles the environment's bytecode when it installs (once: 5,156 files in 9 s on 2 cores; 0.5 s on a later sync
# that changes nothing), so a fresh clone's first processes, started together, do not each compile the same modules.
export UV_COMPILE_BYTECODE ?= 1

.PHONY: run serve test test-debs install install-run uv migrate bootstrap browsers bench faults soak redis-server lint

uv:
	@command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet --disable-pip-version-check uv

# Everything, the test tools (dev group) included: make test, faults, bench, lint.
install: uv
	uv sync --frozen

# What running needs: the same environment as `install` (the dev group included), so that make run, make test and a
# plain `uv run` in a second terminal agree on .venv and none of them installs or removes anything the next one
# needs (the image, Dockerfile, installs without the dev group).
install-run: install

# The one place the port is set: `make run PORT=8001`. Every link the platform prints follows it: API_ROOT (pay_url,
# create_staff's admin_url, the banner) is exported to every process, and written to var/api_root for manage.py in a
# second terminal (config/settings/local.py). An API_ROOT of your own (a tunnel, a proxy) wins.
PORT ?= 8000
run serve: export PORT := $(PORT)
run serve: export API_ROOT ?= http://127.0.0.1:$(PORT)

# Development settings, said explicitly: without DJANGO_SETTINGS_MODULE, manage.py, wsgi and celery take production
# settings, which refuse to start without their secrets (fail closed, docs/runbook.md).
run serve migrate bootstrap: export DJANGO_SETTINGS_MODULE = config.settings.local
# The suite's settings, whatever a developer's shell exports (pytest-django prefers the environment to pyproject).
test faults lint: export DJANGO_SETTINGS_MODULE = config.settings.test

migrate: install-run
	uv run python manage.py migrate --noinput

bootstrap: migrate
	uv run python manage.py bootstrap

# Serves the platform with its Celery worker and beat on http://127.0.0.1:$(PORT) (8000), after migrate and bootstrap
# (config/serve.py). No DATABASE_URL: an embedded PostgreSQL in var/postgres; no REDIS_URL: an embedded Valkey in
# var/valkey (broker and cache); both started first and stopped last (config/embedded.py), `uv run python manage.py
# ...` in a second terminal reaches them. Ctrl-C, SIGINT or SIGTERM stops everything; one process that ends by itself
# stops the others, and a line says which. docs/development.md, "What make run does".
# $$PPID: this make, which config/embedded.py watches (a SIGINT sent to make alone does not reach its recipe).
run: install-run
	exec uv run python -m config.embedded --parent $$PPID python -m config.serve --prepare

# The part of `run` after its servers: with DATABASE_URL and REDIS_URL set, or a running `make run`'s.
# PREPARE=no: serve the database as it is (no migrate, no bootstrap).
serve: install-run
	uv run python -m config.serve $(if $(filter no,$(PREPARE)),,--prepare)

# Debian's chromium drives the hosted-page and admin browser tests (playwright cannot download browsers here).
browsers:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The whole suite on the local PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379), in PYTEST_WORKERS
# pytest-xdist workers (docs/testing.md, "Parallel"; the choice of 4: docs/performance.md, "Suite"). Worker gwN uses
# Redis db (REDIS_URL's) + N. PYTEST_WORKERS=0: serially in one process, as plain `uv run pytest` runs.
# Beside it, while the controller migrates the template (~25 s on one core, the other idle), one `--collect-only`
# writes pytest's rewritten test modules and the bytecode once: on a fresh clone each worker would otherwise rewrite
# the same ~590 modules itself (23 s of CPU each, against 10 s with them written; docs/performance.md, "Suite").
PYTEST_WORKERS ?= 4
test: install test-debs
	$(if $(filter-out 0,$(PYTEST_WORKERS)),uv run --no-sync pytest --collect-only -q >/dev/null 2>&1 &)\
	uv run pytest -n $(PYTEST_WORKERS) --dist loadgroup

# The Debian packages make test needs (chromium: browser tests; redis-server: the drills' private servers; pgbouncer:
# tests/pgbouncer and tests/hosts; npm, with node: PayMongo's Node SDK against its emulator,
# tests/channels/test_paymongo_node_sdk.py; postgresql-15: the primary and streaming replica tests/replica starts;
# haproxy: tests/hosts and the compose file's check; wrk and haproxy: the bench's two-hosts row at a tiny size,
# tests/bench), the same checks as `browsers`,
# `redis-server` and `pgbouncer` below, but whatever is missing on a clean host installed in ONE apt-get update and
# install rather than one each (each update alone ~10-30 s).
test-debs:
	@missing="$$(command -v chromium >/dev/null 2>&1 || echo chromium) \
	$$(command -v redis-server >/dev/null 2>&1 || echo redis-server) \
	$$(command -v npm >/dev/null 2>&1 || echo npm) \
	$$(command -v pgbouncer >/dev/null 2>&1 || test -x /usr/sbin/pgbouncer || echo pgbouncer) \
	$$(test -x /usr/lib/postgresql/15/bin/pg_basebackup || echo postgresql-15) \
	$$(command -v haproxy >/dev/null 2>&1 || test -x /usr/sbin/haproxy || echo haproxy) \
	$$(command -v wrk >/dev/null 2>&1 || echo wrk)"; \
	if [ -n "$$(echo $$missing)" ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi

# Fault drills (docs/faults.md): real gunicorn, Celery worker and beat on PostgreSQL, a private redis-server per
# drill on its own port (never the shared one); workers SIGKILLed, Redis killed, DB backends terminated.
# Also part of `make test` (testpaths). About 3 minutes.
faults: install redis-server
	uv run pytest tests/faults -q

# The whole-platform soak (docs/faults.md, "The soak"): gunicorn, a Celery worker and beat, PostgreSQL (a database
# of its own, <DATABASE_URL's name>_soak or SOAK_DATABASE, claimed then recreated: a second soak on the same name
# stops instead of dropping it) and a private redis-server, many concurrent actors and faults on
# a schedule for SOAK_SECONDS (default 90), then the checks: ONE JSON object on stdout, exit 1 if any check fails.
# SOAK_SEED=N repeats a run's choices (the seed is printed). make test runs a 90-second one (tests/soak/test_soak.py).
# SOAK_STACK=make-run: the actors against `make run`'s own default stack instead (embedded PostgreSQL and Valkey in a
# copy of the checkout; the sandbox deployment, no faults: docs/development.md). SOAK_BROKER=rabbitmq: the Celery
# broker on a vhost of its own on the machine's RabbitMQ, production's broker (docs/faults.md, "On RabbitMQ").
# SOAK_HOSTS=2: the platform as two hosts behind HAProxy and PgBouncer, whole hosts killed in turn and started again
# (docs/faults.md, "On several hosts").
SOAK_SECONDS ?= 90
soak: export DJANGO_SETTINGS_MODULE = config.settings.test
soak: install redis-server
	uv run python -m tests.soak.harness --seconds $(SOAK_SECONDS) $(if $(SOAK_SEED),--seed $(SOAK_SEED),) \
	  $(if $(SOAK_STACK),--stack $(SOAK_STACK),)

redis-server:
	@command -v redis-server >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }

# Debian's PgBouncer, in transaction pooling in tests/pgbouncer and make bench (in /usr/sbin: not on every PATH).
pgbouncer:
	@command -v pgbouncer >/dev/null 2>&1 || test -x /usr/sbin/pgbouncer || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; }

# Throughput and latency of the signed endpoints under wrk (not part of make test). See docs/performance.md.
# HAProxy: the row through the proxy to two hosts.
bench: install pgbouncer
	@command -v wrk >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
	@command -v haproxy >/dev/null 2>&1 || test -x /usr/sbin/haproxy || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null; }
	uv run python bench/run.py

lint: install
	uv run python manage.py makemigrations --check --dry-run
