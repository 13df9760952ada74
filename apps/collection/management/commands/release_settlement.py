from datetime import date

from django.core.management.base import CommandError

from apps.collection.services import collection_settlement_release
from apps.common.management.json_command import JsonCommand


def iso_date(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise CommandError(f"--as-of: {value!r} is not a date (YYYY-MM-DD)") from None


class Command(JsonCommand):
    help = ("Run the D1 release now: settling credits paid before today's 00:00 (SETTLEMENT_TIME_ZONE) to available. "
            "--as-of DATE runs that day's release instead (a past day to repair it, at most tomorrow to show D1 "
            "today); --dry-run prints what is due and moves nothing.")

    def add_arguments(self, parser):
        parser.add_argument("--as-of", metavar="YYYY-MM-DD", help="release as the run of 00:00 of this day would")
        parser.add_argument("--dry-run", action="store_true", help="print what is due, release nothing")

    def run(self, *, as_of=None, dry_run=False, **options):
        return collection_settlement_release(as_of=as_of and iso_date(as_of), dry_run=dry_run)
