#!/usr/bin/env python
import os
import sys


def main() -> None:
    # Fail closed: without DJANGO_SETTINGS_MODULE, production settings, which refuse to start without their secrets
    # (README, Running with production settings). Development sets config.settings.local (make run does). The one
    # exception is make run's second terminal: with no DATABASE_URL and this checkout's own embedded PostgreSQL
    # running, this is a development machine and a command takes the settings make run serves with.
    if "DJANGO_SETTINGS_MODULE" not in os.environ:
        from config import embedded_postgres

        local = not os.environ.get("DATABASE_URL") and embedded_postgres.running()
        os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.local" if local else "config.settings.production"
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
