"""Base of the operations CLI (docs/api.md, "Operations CLI"): one JSON object on stdout, logs on stderr, non-zero on
bad input."""

import json

from django.core.management.base import BaseCommand, CommandError

from apps.common import audit
from apps.common.errors import DomainError
from apps.common.history import command_context, os_user


class JsonCommand(BaseCommand):
    # No system checks before each operations command: they import the whole URLconf and every view (3.5 s of a
    # 10 s start-up). `manage.py check`, migrate, runserver and the test suite still run them all.
    requires_system_checks = []
    # Errors a command turns into a clean message and exit code 1 (no traceback).
    expected_errors: tuple[type[Exception], ...] = (ValueError, DomainError, LookupError)

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.add_argument("--operator", default=None,
                            help="who runs the command, recorded in the audit trail (default: the OS user)")
        return parser

    def handle(self, *args, **options):
        operator = options.get("operator")
        if operator is not None and (not operator.strip() or len(operator) > 100):
            raise CommandError("--operator must be a name of 1-100 characters.")
        self.operator = operator = operator or os_user()
        try:
            # Who ran it (--operator, else the OS user) labels the audit rows and the settings trail's events.
            with audit.cli_operator(operator), command_context(command=self.__module__.rsplit(".", 1)[-1],
                                                               operator=operator):
                result = self.run(**options)
        except CommandError:
            raise
        except self.expected_errors as exc:
            raise CommandError(getattr(exc, "msg", None) or str(exc)) from None
        self.stdout.write(json.dumps(result, ensure_ascii=False, indent=None))

    def run(self, **options) -> dict:
        raise NotImplementedError


def read_text_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
