"""Base of the operations CLI (contract §8): one JSON object on stdout, logs on stderr, non-zero on bad input."""

import json

from django.core.management.base import BaseCommand, CommandError

from apps.common.errors import DomainError
from apps.common.history import command_context


class JsonCommand(BaseCommand):
    # Errors a command turns into a clean message and exit code 1 (no traceback).
    expected_errors: tuple[type[Exception], ...] = (ValueError, DomainError, LookupError)

    def handle(self, *args, **options):
        try:
            # The settings audit trail names the command and who ran it (--operator, else the OS user).
            with command_context(command=self.__module__.rsplit(".", 1)[-1], operator=options.get("operator")):
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
