#!/usr/bin/env python
import os
import sys


def main() -> None:
    # Fail closed: without DJANGO_SETTINGS_MODULE, production settings, which refuse to start without their secrets
    # (README, Running with production settings). Development sets config.settings.local (make run does).
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
