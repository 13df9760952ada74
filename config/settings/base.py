"""Settings shared by every environment; every value comes from the environment (django-environ)."""

from datetime import timedelta
from pathlib import Path

import environ

from config.schedules import settlement_crontab
from config.sentry import sentry_init

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = BASE_DIR / "var"

env = environ.Env()

SECRET_KEY = env("SECRET_KEY", default="dev-only-insecure-secret-key-change-me-in-production")
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])

# docs/api.md, "Addresses": {api_root}, {base_url} = {api_root}/openapi/v1, {pay_base_url}.
API_ROOT = env("API_ROOT", default="http://127.0.0.1:8000").rstrip("/")
PAY_BASE_URL = env("PAY_BASE_URL", default=API_ROOT).rstrip("/")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Redoc's JavaScript for /openapi/v1/docs/, served from our static files (no CDN)
    "django_structlog",
    "apps.common",
    "apps.currencies",
    "apps.merchants",
    "apps.ledger",
    "apps.channels",
    "apps.callbacks",
    "apps.collection",
    "apps.payout",
    "apps.payout_batches",  # payouts by hand in the merchant portal (docs/portal.md)
    "apps.operations",  # above the domains: reads several of them (the operations overview)
    "apps.portal",  # the merchant's own back office (docs/portal.md)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.logging.RequestId",
    "config.metrics.RequestMetrics",
    # Django's sessions, CSRF, authentication and messages, except on the signed API (config/middleware.py).
    "config.middleware.BrowserSessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "config.middleware.BrowserCsrfViewMiddleware",
    "config.middleware.BrowserAuthenticationMiddleware",
    "config.middleware.BrowserMessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "apps.common.refcache.ReferenceScopeMiddleware",
]

# Paths that are served without sessions, CSRF, a signed-in user or messages (config/middleware.py): the signed
# merchant API, authenticated by each request's signature alone (docs/api.md, "Signing").
BROWSERLESS_PATH_PREFIXES = ["/openapi/v1/"]
# Browser pages served without sessions, a signed-in user or messages, whose views check CSRF themselves: the hosted
# pay page (the payer has no session; apps.collection.views._HostedPageCsrf guards its form), where the middleware of
# the line above is skipped too (docs/performance.md, "Measured changes").
SESSIONLESS_PATH_PREFIXES = ["/pay/"]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# PostgreSQL, the only database: DATABASE_URL is required (production and tests set it; local settings default it
# to the embedded server of `make run`).
DATABASES = {"default": env.db("DATABASE_URL")}
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise environ.ImproperlyConfigured(f"DATABASE_URL must be a postgres:// URL, not {DATABASES['default']['ENGINE']}")
# django-postgres-extra's backend: Django's PostgreSQL backend with the schema editor and introspection that manage
# the partitioned history's months (apps/common/partitions.py). It would also create the hstore extension at
# connection set-up; nothing uses hstore, and the database user need not be able to create extensions.
DATABASES["default"]["ENGINE"] = "psqlextra.backend"
POSTGRES_EXTRA_AUTO_EXTENSION_SET_UP = False
# A database host that accepts no connection, or a black-holed path to it, fails a request in seconds instead of the
# operating system's minutes (docs/faults.md, drill 6).
DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
    "connect_timeout", env.int("DATABASE_CONNECT_TIMEOUT", default=5))
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=0))
# With persistent connections, check a reused connection once per request: one the server dropped (PostgreSQL
# restart or failover, an idle timeout) is replaced instead of failing the request (docs/faults.md, drill 3).
DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", True)
# Behind PgBouncer in transaction pooling (DATABASE_POOLER=pgbouncer-transaction) consecutive transactions of one
# connection may run on different server sessions, so nothing may outlive a transaction: no server-side cursors
# (Django's docs, "Transaction pooling and server-side cursors"); psycopg's prepared statements stay off (Django's
# default). Empty: a direct connection, or a pooler in session pooling.
DATABASE_POOLER = env("DATABASE_POOLER", default="")
if DATABASE_POOLER not in ("", "pgbouncer-transaction"):
    raise environ.ImproperlyConfigured(f"DATABASE_POOLER must be empty or pgbouncer-transaction, not {DATABASE_POOLER}")
DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = DATABASE_POOLER == "pgbouncer-transaction"
# Prepared statements (docs/performance.md, "Prepared statements"): psycopg binds parameters on the server
# (Django's OPTIONS "server_side_binding") and prepares a statement a connection has run DATABASE_PREPARE_THRESHOLD
# times, so PostgreSQL parses and plans the money path's statements once per connection instead of on every request.
# On for a direct connection (or a pooler in session pooling); off behind PgBouncer in transaction pooling, whose
# 1.18 cannot carry a prepared statement from one transaction's server session to the next. Only persistent
# connections (CONN_MAX_AGE > 0) keep what they prepared.
DATABASE_PREPARED_STATEMENTS = env.bool("DATABASE_PREPARED_STATEMENTS", default=DATABASE_POOLER == "")
if DATABASE_PREPARED_STATEMENTS and DATABASE_POOLER == "pgbouncer-transaction":
    raise environ.ImproperlyConfigured("DATABASE_PREPARED_STATEMENTS cannot be on with DATABASE_POOLER="
                                       "pgbouncer-transaction: PgBouncer 1.18 does not carry prepared statements")
if DATABASE_PREPARED_STATEMENTS:
    DATABASES["default"]["OPTIONS"].update(
        server_side_binding=True, prepare_threshold=env.int("DATABASE_PREPARE_THRESHOLD", default=5))
# A PostgreSQL streaming replica for the reads that tolerate seconds of lag (docs/architecture.md, "Where reads go");
# absent: every read on the primary. Its connect timeout is short (libpq's least is 2 s): a replica that does not
# answer costs one such wait per DATABASE_REPLICA_CHECK_INTERVAL seconds and process, then the primary answers. A
# replica further behind than DATABASE_REPLICA_MAX_LAG seconds is skipped too; a page may show data up to about
# MAX_LAG + CHECK_INTERVAL seconds old, and says "as of" when.
DATABASE_REPLICA_MAX_LAG = env.float("DATABASE_REPLICA_MAX_LAG", default=5.0)
DATABASE_REPLICA_CHECK_INTERVAL = env.float("DATABASE_REPLICA_CHECK_INTERVAL", default=5.0)
if env("DATABASE_REPLICA_URL", default=""):
    DATABASES["replica"] = env.db("DATABASE_REPLICA_URL")
    if DATABASES["replica"]["ENGINE"] != "django.db.backends.postgresql":
        raise environ.ImproperlyConfigured("DATABASE_REPLICA_URL must be a postgres:// URL")
    DATABASES["replica"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", env.int("DATABASE_REPLICA_CONNECT_TIMEOUT", default=2))
    DATABASES["replica"].setdefault("CONN_MAX_AGE", DATABASES["default"]["CONN_MAX_AGE"])
    DATABASES["replica"].setdefault("CONN_HEALTH_CHECKS", True)
    DATABASES["replica"]["DISABLE_SERVER_SIDE_CURSORS"] = DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"]
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}  # a test run reads its own test database through it
    # Routes reads to the replica only where a page asked for it (apps/common/replica.py); without a replica, no
    # router, and no router's cost on any query.
    DATABASE_ROUTERS = ["apps.common.replica.ReplicaRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Redis (or Valkey): the Celery broker, the cache, the nonce store (SET NX with TTL) and the rate-limit counters.
# Always set: make run's settings point it at the embedded Valkey (config/settings/local.py), the suite's at the local
# Redis, production's at the deployment's.
REDIS_URL = env("REDIS_URL")
# A Redis that accepts connections but does not answer (stopped, swapping, a black-holed network path) must not
# hold requests forever: every connect and every reply waits at most this long, a cache command is tried once and
# a task publish twice (docs/faults.md, drill 5). Above the broker's 1 s BRPOP poll.
REDIS_SOCKET_TIMEOUT = env.float("REDIS_SOCKET_TIMEOUT", default=2.0)
REDIS_CLIENT_OPTIONS = {"socket_connect_timeout": REDIS_SOCKET_TIMEOUT, "socket_timeout": REDIS_SOCKET_TIMEOUT}
CACHES = {"default": {"BACKEND": "config.cache.RedisCache", "LOCATION": REDIS_URL,  # config/cache.py
                      "OPTIONS": REDIS_CLIENT_OPTIONS}}
# The Celery broker (docs/architecture.md, "The broker"): RabbitMQ in production (amqp://), Redis in development and
# by default in the suite. A broker URL of each kind gets the settings below; everything else is the same.
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default=REDIS_URL)
BROKER_IS_RABBITMQ = CELERY_BROKER_URL.startswith(("amqp://", "amqps://", "pyamqp://"))
if BROKER_IS_RABBITMQ:
    # Quorum queues: replicated, and a message delivered to a worker stays the broker's until acknowledged, so a
    # worker lost (or a connection cut) between delivery and ack gives it back at once, with no visibility timeout.
    # Celery then uses per-consumer prefetch (quorum queues refuse global QoS) and delivers countdown tasks through
    # RabbitMQ's native delayed delivery, which needs an exchange that is not direct: topic.
    CELERY_TASK_DEFAULT_QUEUE_TYPE = "quorum"
    CELERY_TASK_DEFAULT_EXCHANGE_TYPE = "topic"
    CELERY_WORKER_DETECT_QUORUM_QUEUES = True
    # Publisher confirms: a publish returns once RabbitMQ has stored the message, so a task queued after commit is
    # not lost in a socket buffer when the broker goes away; a refused one raises, and the sweepers queue it again.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"confirm_publish": True}
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600, **REDIS_CLIENT_OPTIONS}
    # kombu's Redis transport with acknowledgements that cannot wedge a worker when Redis stalls (config/broker.py)
    CELERY_BROKER_TRANSPORT = "config.broker:Transport"

CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A publish on the request path (after commit) tries twice, then gives up: every such task has a sweeper behind it.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Beat sends the schedule from one process however many are started: the one holding a lock in REDIS_URL's Redis;
# another waits and takes over within BEAT_LOCK_SECONDS of the holder's death (config/beat.py, docs/deployment.md).
CELERY_BEAT_SCHEDULER = "config.beat:SingleBeatScheduler"
BEAT_LOCK_KEY = env("BEAT_LOCK_KEY", default="payments:beat-lock")
BEAT_LOCK_SECONDS = env.int("BEAT_LOCK_SECONDS", default=30)
CELERY_BEAT_SCHEDULE = {
    "callbacks-sweep": {"task": "apps.callbacks.tasks.sweep_due_deliveries", "schedule": timedelta(seconds=5)},
    "collection-expire": {"task": "apps.collection.tasks.expire_due_orders", "schedule": timedelta(seconds=10)},
    "collection-release-d1": {"task": "apps.collection.tasks.release_settlement", "schedule": timedelta(minutes=5)},
    # Stranded orders (docs/faults.md): each sweep hands an order whose next step died to the same service.
    "payout-sweep": {"task": "apps.payout.tasks.sweep_stuck_payouts", "schedule": timedelta(seconds=15)},
    "collection-sweep": {"task": "apps.collection.tasks.sweep_stranded_payins", "schedule": timedelta(seconds=15)},
    # Payouts by hand: an approved batch whose processing stopped is resumed (docs/portal.md).
    "merchant-payout-batches-resume": {"task": "apps.payout_batches.tasks.resume_payout_batches",
                                       "schedule": timedelta(seconds=60)},
    # Refunds asked for in the portal: an approved request left without its refund is finished (docs/portal.md).
    "merchant-refund-requests-resume": {"task": "apps.portal.tasks.resume_refund_requests",
                                        "schedule": timedelta(seconds=60)},
    "channels-reconcile": {"task": "apps.channels.tasks.reconcile_channels", "schedule": timedelta(minutes=5)},
    # Yesterday's statements, after the settlement cut-off and STATEMENT_CLOSE_DELAY_SECONDS (docs/api.md,
    # "Statements").
    # Partitioned history: the months ahead created, the months past retention dropped (docs/runbook.md).
    "partitions-create": {"task": "apps.common.tasks.create_partitions", "schedule": timedelta(hours=6)},
    "partitions-retention": {"task": "apps.common.tasks.drop_expired_partitions",
                             "schedule": settlement_crontab(hour=3, minute=15)},
    "ledger-daily-statements": {"task": "apps.ledger.tasks.prepare_daily_statements",
                                "schedule": settlement_crontab(hour=0, minute=30)},
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# Every time in the back office says its zone (config/formats/en/formats.py: "2026-11-25 14:49:29 UTC").
FORMAT_MODULE_PATH = ["config.formats"]

STATIC_URL = "static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=VAR_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["apps.common.api.parsers.FlatJSONParser"],
    "EXCEPTION_HANDLER": "apps.common.api.exceptions.envelope_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Payment Platform merchant API",
    "VERSION": "v1",  # Redoc shows it after the title: "(v1)", the API's path segment
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": r"/openapi/v1",
    # info.description (signing rules, worked example, the error table of apps/common/errors.py) is generated.
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "apps.common.api.schema.describe_api"],
    "REDOC_DIST": "SIDECAR",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_UI_SETTINGS": {"expandResponses": "200", "jsonSampleExpandLevel": "all", "hideDownloadButton": False},
}

# docs/api.md, "Signing": tolerances.
SIGNATURE_TIMESTAMP_TOLERANCE_SECONDS = env.int("SIGNATURE_TIMESTAMP_TOLERANCE_SECONDS", default=300)
NONCE_TTL_SECONDS = env.int("NONCE_TTL_SECONDS", default=600)
# docs/api.md, "Error codes", 1106: requests per second per merchant.
RATE_LIMIT_PER_SECOND = env.int("RATE_LIMIT_PER_SECOND", default=100)

# Private keys of the platform are encrypted at rest (Fernet) with this key; derived from SECRET_KEY when unset.
PLATFORM_KEY_ENCRYPTION_KEY = env("PLATFORM_KEY_ENCRYPTION_KEY", default="")

# docs/api.md, "Collection orders": D1 release cut-off time zone.
SETTLEMENT_TIME_ZONE = env("SETTLEMENT_TIME_ZONE", default="Asia/Manila")
# A day's statement is stored (and then served as stored) once the day ended this long ago: a posting stamped
# 23:59:59.9 commits a moment later, and a stored statement never changes.
STATEMENT_CLOSE_DELAY_SECONDS = env.int("STATEMENT_CLOSE_DELAY_SECONDS", default=600)
# docs/api.md, "Payout orders": risk rule "more than N payouts to one payee account within 24 h".
PAYOUT_VELOCITY_LIMIT = env.int("PAYOUT_VELOCITY_LIMIT", default=5)

# docs/api.md, "Callbacks".
CALLBACK_TIMEOUT_SECONDS = env.float("CALLBACK_TIMEOUT_SECONDS", default=10.0)
CALLBACK_RETRY_DELAYS_SECONDS = [15, 60, 300, 1800, 7200, 21600, 43200, 86400]
CALLBACK_ALLOW_PRIVATE_HOSTS = env.bool("CALLBACK_ALLOW_PRIVATE_HOSTS", default=False)
# Bulkhead: worker slots one merchant's deliveries may hold at once (a slow endpoint delays only itself).
CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT = env.int("CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT", default=4)
CALLBACK_REPLY_EXCERPT_CHARS = 512
# A worker's claim on an event lasts this long (at least 3 × timeout + 30 s); a worker lost mid-delivery
# delays the callback by at most this, then the sweeper re-dispatches it.
CALLBACK_LEASE_SECONDS = env.int("CALLBACK_LEASE_SECONDS", default=120)
# The sweeper queues a due event again only if no task was queued for it within this many seconds.
CALLBACK_REDISPATCH_SECONDS = env.int("CALLBACK_REDISPATCH_SECONDS", default=30)
# A delivery task goes on with its merchant's next due events (batches of at most its free bulkhead slots) until it
# has made this many attempts or run this long; then a waiting event is queued again, behind other merchants' tasks.
CALLBACK_DRAIN_MAX_EVENTS = env.int("CALLBACK_DRAIN_MAX_EVENTS", default=64)
CALLBACK_DRAIN_MAX_SECONDS = env.float("CALLBACK_DRAIN_MAX_SECONDS", default=2.0)
# Partitioned history (docs/architecture.md, "Partitioned history"): months created ahead of the current one, and the
# months of callback attempts kept (the current one and those before it; a year and the month before it by default).
PARTITIONS_AHEAD_MONTHS = env.int("PARTITIONS_AHEAD_MONTHS", default=3)
CALLBACK_ATTEMPT_RETENTION_MONTHS = env.int("CALLBACK_ATTEMPT_RETENTION_MONTHS", default=13)
# The action audit (who moved money, approved, reversed, adjusted): the statutory period of the books' supporting
# records, ten years; never set it below what the operator's regulator requires.
AUDIT_LOG_RETENTION_MONTHS = env.int("AUDIT_LOG_RETENTION_MONTHS", default=120)

# Channels (docs/channels.md). PLATFORM_ENVIRONMENT decides which channels this deployment may use: `sandbox` only
# the built-in sandbox channels (the default of `make run` and the tests), `live` only real upstreams (the default of
# production settings). The two never share a database.
PLATFORM_ENVIRONMENT = env("PLATFORM_ENVIRONMENT", default="sandbox")
if PLATFORM_ENVIRONMENT not in ("sandbox", "live"):
    raise environ.ImproperlyConfigured(f"PLATFORM_ENVIRONMENT must be sandbox or live, not {PLATFORM_ENVIRONMENT}")
# Xendit's API root when a channel sets none of its own (the tests point channels at a local emulator).
XENDIT_API_BASE_URL = env("XENDIT_API_BASE_URL", default="https://api.xendit.co").rstrip("/")
# PayMongo's API root when a channel sets none of its own, and how far a webhook's Paymongo-Signature timestamp may be
# from our clock before the webhook is refused as stale (a replay outside it; docs/channels.md, "PayMongo").
PAYMONGO_API_BASE_URL = env("PAYMONGO_API_BASE_URL", default="https://api.paymongo.com").rstrip("/")
PAYMONGO_WEBHOOK_TOLERANCE_SECONDS = env.int("PAYMONGO_WEBHOOK_TOLERANCE_SECONDS", default=300)
# Whether a channel's own api_base_url is honoured. Off (production): the adapter's default root only, so no one who
# can edit a channel in the admin can send its secret key, and the webhooks' re-reads, to a host of their choosing.
# On in development and the tests, which point channels at a local emulator.
CHANNEL_API_BASE_URL_OVERRIDE = env.bool("CHANNEL_API_BASE_URL_OVERRIDE", default=False)
# Every upstream HTTP call gives up after this long; a create that timed out is retried with the same idempotency key.
CHANNEL_HTTP_TIMEOUT_SECONDS = env.float("CHANNEL_HTTP_TIMEOUT_SECONDS", default=15.0)
# reconcile_channels asks the upstream about payouts PROCESSING longer than this, and about pay-ins whose expiry
# passed less than CHANNEL_RECONCILE_PAYIN_WINDOW_SECONDS ago.
CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS = env.int("CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS", default=900)
CHANNEL_RECONCILE_PAYIN_WINDOW_SECONDS = env.int("CHANNEL_RECONCILE_PAYIN_WINDOW_SECONDS", default=3 * 86400)
# Per-channel circuit breaker (apps/channels/health.py, docs/channels.md "Health"): it opens after this many failed
# upstream calls in one window when they are at least this share of the window's calls, stays open for the cool-down,
# then lets a few new orders per probe slice through and closes after that many successes.
CHANNEL_BREAKER_FAILURES = env.int("CHANNEL_BREAKER_FAILURES", default=5)
CHANNEL_BREAKER_FAILURE_RATIO = env.float("CHANNEL_BREAKER_FAILURE_RATIO", default=0.5)
CHANNEL_BREAKER_WINDOW_SECONDS = env.int("CHANNEL_BREAKER_WINDOW_SECONDS", default=60)
CHANNEL_BREAKER_COOLDOWN_SECONDS = env.int("CHANNEL_BREAKER_COOLDOWN_SECONDS", default=30)
CHANNEL_BREAKER_PROBES = env.int("CHANNEL_BREAKER_PROBES", default=2)
CHANNEL_BREAKER_PROBE_SLICE_SECONDS = env.int("CHANNEL_BREAKER_PROBE_SLICE_SECONDS", default=10)
CHANNEL_BREAKER_CLOSE_AFTER = env.int("CHANNEL_BREAKER_CLOSE_AFTER", default=3)
# A payout whose submission was ambiguous (a timeout, a 5xx) moves to another channel only after the first channel,
# asked by our idempotency key at least this long after the submission, has nothing (docs/channels.md, "Failover").
CHANNEL_FAILOVER_LOOKUP_AFTER_SECONDS = env.int("CHANNEL_FAILOVER_LOOKUP_AFTER_SECONDS", default=300)

# docs/api.md, "Sandbox channel": timings.
SANDBOX_PAYOUT_SETTLE_SECONDS = env.float("SANDBOX_PAYOUT_SETTLE_SECONDS", default=1.0)
SANDBOX_PAYOUT_RETURN_SECONDS = env.float("SANDBOX_PAYOUT_RETURN_SECONDS", default=3.0)
# A sandbox refund's answer comes this long after its submission (docs/api.md, "Sandbox channel").
SANDBOX_REFUND_SETTLE_SECONDS = env.float("SANDBOX_REFUND_SETTLE_SECONDS", default=3.0)

# Logs (docs/runbook.md, "Health and logs"): stdlib logging and structlog share one handler on stderr. LOG_FORMAT=json writes
# one JSON object a line (production's default), plain a readable line; both carry the request_id bound by
# config.logging.RequestId, in the request and (django-structlog's Celery receivers) in every Celery task it queued.
LOG_FORMAT = env("LOG_FORMAT", default="plain")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {"()": "config.logging.formatter", "json": True},
        "plain": {"()": "config.logging.formatter", "json": False},
    },
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["stderr"], "level": env("LOG_LEVEL", default="INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # One line per request: the access log (runserver's django.server; gunicorn's --access-logfile -) has every
        # request with its status, so django.request's "Not Found: /x", "Unauthorized: /y" for 4xx would be a second
        # line. Its 5xx errors, with their tracebacks, stay.
        "django.request": {"level": "ERROR"},
        # django-structlog's task_enqueued / task_started / task_succeeded would double the worker's own lines.
        "django_structlog.celery": {"level": "WARNING"},
    },
}
DJANGO_STRUCTLOG_CELERY_ENABLED = True

# Metrics (docs/runbook.md, "Metrics and alerts"): GET /metrics answers clients in these networks, or bearing METRICS_TOKEN
# (Authorization: Bearer ...); anyone else gets a 404.
METRICS_ALLOWED_NETWORKS = env.list("METRICS_ALLOWED_NETWORKS", default=["127.0.0.0/8", "::1/128"])
METRICS_TOKEN = env("METRICS_TOKEN", default="")

# Sentry (docs/runbook.md, "Health and logs"): errors of the web and the workers are sent when SENTRY_DSN is set; no
# personal data, no request bodies, no local variables. Unset: the SDK is not initialised at all.
SENTRY_DSN = env("SENTRY_DSN", default="")
SENTRY_ENVIRONMENT = env("SENTRY_ENVIRONMENT", default="")
SENTRY_TRACES_SAMPLE_RATE = env.float("SENTRY_TRACES_SAMPLE_RATE", default=0.0)
SENTRY_ENABLED = sentry_init(dsn=SENTRY_DSN, environment=SENTRY_ENVIRONMENT,
                             traces_sample_rate=SENTRY_TRACES_SAMPLE_RATE)

# Merchant self-serve re-send (POST /openapi/v1/callbacks/resend): re-send requests per merchant per minute (1106).
CALLBACK_RESEND_PER_MINUTE = env.int("CALLBACK_RESEND_PER_MINUTE", default=10)

# ---- Back office: staff sign-in with a second factor, lockout, sessions, settings audit trail ---------------------
INSTALLED_APPS += [
    "django_otp",
    "django_otp.plugins.otp_totp",
    "django_otp.plugins.otp_static",
    "axes",
    "pgtrigger",
    "pghistory",
]
# After AuthenticationMiddleware: django-otp marks a request's user verified (a second factor in this session); the
# admin then refuses anyone who is not (apps.common.staff_signin); an admin request that writes runs in a pghistory
# context naming its user. django-axes last, as its documentation asks: it answers a locked-out sign-in.
MIDDLEWARE.insert(MIDDLEWARE.index("config.middleware.BrowserAuthenticationMiddleware") + 1,
                  "django_otp.middleware.OTPMiddleware")
MIDDLEWARE.insert(MIDDLEWARE.index("django_otp.middleware.OTPMiddleware") + 1,
                  "apps.common.staff_signin.AdminRequiresSecondFactor")
MIDDLEWARE.insert(MIDDLEWARE.index("apps.common.staff_signin.AdminRequiresSecondFactor") + 1,
                  "apps.common.history.AdminHistoryContext")
MIDDLEWARE.append("axes.middleware.AxesMiddleware")
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]

# Failed sign-ins (docs/staff-access.md): a wrong password, or a wrong second-factor code, counts as a failure of that
# username from that address; AXES_FAILURE_LIMIT of them lock that pair out for AXES_COOLOFF_HOURS (an administrator
# lifts it sooner: manage.py axes_reset_username NAME). A success resets the count. Each TOTP device also slows
# down guessing by itself (django-otp's throttling: 1, 2, 4, ... s after each wrong code).
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(hours=env.float("AXES_COOLOFF_HOURS", default=1.0))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "admin/signin/locked_out.html"
AXES_VERBOSE = False
AXES_ENABLE_ADMIN = False  # a lock is lifted with manage.py axes_reset_username (docs/staff-access.md)
# A proxy in front (BEHIND_PROXY=true) is the one to ask for the client's address, and for the scheme (below).
BEHIND_PROXY = env.bool("BEHIND_PROXY", default=False)
AXES_IPWARE_PROXY_COUNT = 1 if BEHIND_PROXY else None
AXES_IPWARE_META_PRECEDENCE_ORDER = ["HTTP_X_FORWARDED_FOR", "REMOTE_ADDR"] if BEHIND_PROXY else ["REMOTE_ADDR"]
# X-Forwarded-Proto is believed only when told a proxy that sets it (and drops a client's own) is in front; else any
# client could claim https.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BEHIND_PROXY else None

# A staff session ends after a working day without a request (9 h; each request starts the 9 h again), and when the
# browser closes. Only sessions that exist are saved: API and pay-page requests carry none.
SESSION_COOKIE_AGE = env.int("SESSION_COOKIE_AGE", default=9 * 3600)
SESSION_SAVE_EVERY_REQUEST = True
SESSION_EXPIRE_AT_BROWSER_CLOSE = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"

# TOTP devices: 6 digits, 30 s, one step of clock drift either way; the issuer names the platform in the app.
OTP_TOTP_ISSUER = env("OTP_TOTP_ISSUER", default="Payment Platform")
OTP_TOTP_TOLERANCE = 1
STAFF_RECOVERY_CODES = 10

# Settings audit trail (django-pghistory, docs/staff-access.md): triggers write an event row for every insert and
# update of the tracked models, from any path; its context carries who (the admin user, or the command and the
# operator). No context for GET requests.
PGHISTORY_MIDDLEWARE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
PGHISTORY_APPEND_ONLY = True  # event tables: a database trigger refuses UPDATE and DELETE (below for AuditLog)

# The merchant portal's safeguards around a person's access (docs/portal.md, docs/staff-access.md): a recovery link
# works this long; for this long after it is used the person changes no key or callback URL and approves no payout;
# a key version uploaded in the portal verifies once a second owner confirms it, or after this wait.
PORTAL_RECOVERY_LINK_HOURS = env.float("PORTAL_RECOVERY_LINK_HOURS", default=24)
PORTAL_RECOVERY_COOLING_HOURS = env.float("PORTAL_RECOVERY_COOLING_HOURS", default=24)
PORTAL_KEY_WAIT_HOURS = env.float("PORTAL_KEY_WAIT_HOURS", default=48)

# E-mail to merchant users (a recovery link, notices to a merchant's owners), through SMTP at EMAIL_HOST. Never the
# console backend outside development: it would print a recovery link into the logs.
EMAIL_BACKEND = env("EMAIL_BACKEND", default="django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=10)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="Payment Platform <no-reply@localhost>")
