#!/usr/bin/env python
import os
import sys

NOT_RUNNING = """\
manage.py: the development database is not running. Start it with `make run` (in another terminal); while it runs,
`uv run python manage.py ...` reaches it with nothing set.
Or point this command at a PostgreSQL and Redis of your own: DATABASE_URL and REDIS_URL, with
DJANGO_SETTINGS_MODULE=config.settings.local for development (production settings also need SECRET_KEY,
PLATFORM_KEY_ENCRYPTION_KEY and ALLOWED_HOSTS: README, "Running with production settings")."""


def main() -> None:
    # Fail closed: without DJANGO_SETTINGS_MODULE, production settings, which refuse to start without their secrets
    # (README, Running with production settings). Development sets config.settings.local (make run does). The one
    # exception is make run's second terminal: with no DATABASE_URL and this checkout's own embedded PostgreSQL
    # running, this is a development machine and a command takes the settings make run serves with. With neither,
    # nothing could be reached: say so and how to start it, rather than a settings error's traceback.
    settings_module = os.environ.get("DJANGO_SETTINGS_MODULE")
    if settings_module in (None, "config.settings.local") and not os.environ.get("DATABASE_URL"):
        from config import embedded_postgres

        if not embedded_postgres.running():
            print(NOT_RUNNING, file=sys.stderr)
            sys.exit(1)
        os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.local"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
