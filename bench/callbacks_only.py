"""Only the callback part of make bench: a fresh database, bootstrap, then bench/callback_throughput.measure().

    uv run python bench/callbacks_only.py [--events 2000] [--database payments_bench]

Same settings and environment as bench/run.py (config.settings.bench, Redis broker, CONN_MAX_AGE), without the
gunicorn/wrk part.
"""

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.run import recreate_database  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=os.environ.get("BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432"))
    parser.add_argument("--database", default="payments_bench")
    parser.add_argument("--redis", default=os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/5"))
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench-cb-"))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.bench",
        "DATABASE_URL": f"{args.postgres.rstrip('/')}/{args.database}",
        "REDIS_URL": args.redis,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "PLATFORM_KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "CONN_MAX_AGE": "600",
        "LOG_LEVEL": "WARNING",
        "STATIC_ROOT": str(workdir / "static"),
    }
    recreate_database(args.postgres.rstrip("/") + "/postgres", args.database)
    for argv in (["migrate", "--noinput"], ["createcachetable"], ["bootstrap"]):
        subprocess.run([sys.executable, "manage.py", *argv], cwd=ROOT, env=env, check=True, capture_output=True)
    os.environ.update(env)
    import django

    django.setup()
    from config.celery import app

    app.control.purge()  # messages of an earlier run name events of a dropped database
    from bench.callback_throughput import measure

    result = measure(env=env, events=args.events, timeout=args.timeout, concurrency=args.concurrency)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
