import argparse
import getpass
import sys

from django.conf import settings
from django.core.management import CommandError

from apps.common.management.json_command import JsonCommand
from apps.payout.permissions import STAFF_ROLES, staff_create


class RefusePasswordArgument(argparse.Action):
    """--password VALUE is refused (without echoing VALUE): on the command line it would be in the shell history
    and in every process listing."""

    def __call__(self, parser, namespace, values, option_string=None):
        raise argparse.ArgumentError(self, "the password is never taken on the command line: answer the prompt, "
                                           "or pipe it in with --password-stdin")


class Command(JsonCommand):
    help = ("Create a staff user for the admin with a named role: operator (Payout operations: sees payouts, "
            "reverses), risk-reviewer (Risk reviewer: the review queue, approve/reject, deny list) or admin "
            "(superuser). The password is prompted for, or read from stdin with --password-stdin; never an argument.")
    stealth_options = ("stdin",)

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=list(STAFF_ROLES))
        parser.add_argument("--email", default="")
        parser.add_argument("--password-stdin", action="store_true",
                            help="read the password from the first line of stdin (for scripts)")
        parser.add_argument("--password", action=RefusePasswordArgument, help=argparse.SUPPRESS)

    def run(self, **options):
        password = self._read_password(options)
        user = staff_create(username=options["username"], role=options["role"], password=password,
                            email=options["email"])
        return {"username": user.get_username(), "email": user.email, "role": options["role"],
                "is_staff": user.is_staff, "is_superuser": user.is_superuser,
                "groups": sorted(user.groups.values_list("name", flat=True)),
                "admin_url": f"{settings.API_ROOT}/admin/",
                # Every admin session needs a second factor (docs/staff-access.md): enrolled at the first sign-in.
                "second_factor": "enrol at the first sign-in on admin_url: the password, then scan the QR code with an "
                                 "authenticator app and enter its code; keep the recovery codes shown once"}

    def _read_password(self, options) -> str:
        stdin = options.get("stdin") or sys.stdin  # call_command(..., stdin=...) in tests
        if options["password_stdin"]:
            password = stdin.readline().removesuffix("\n").removesuffix("\r")
            if not password:
                raise CommandError("no password on stdin")
            return password
        if not stdin.isatty():
            raise CommandError("no terminal to prompt for the password: pipe it in with --password-stdin")
        password = getpass.getpass("Password: ")
        if password != getpass.getpass("Password (again): "):
            raise CommandError("the two passwords differ")
        return password
