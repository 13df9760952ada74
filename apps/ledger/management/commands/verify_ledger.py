import json
import sys

from django.core.management.base import BaseCommand

from apps.ledger.selectors import ledger_verify


class Command(BaseCommand):
    help = "Check every ledger invariant; exit 1 with a report if any fails."

    def handle(self, *args, **options):
        report = ledger_verify()
        self.stdout.write(json.dumps(report))
        if not report["ok"]:
            sys.exit(1)
