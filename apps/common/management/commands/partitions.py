from apps.common.management.json_command import JsonCommand
from apps.common.partitions import partitions_create, partitions_drop_expired


class Command(JsonCommand):
    help = ("Create the partitioned tables' missing months (the current one and PARTITIONS_AHEAD_MONTHS ahead), what "
            "beat does every 6 hours; with --drop-expired, also detach and drop the months past their retention that "
            "nothing still needs, what beat does daily (docs/runbook.md, \"Partitions\").")

    def add_arguments(self, parser):
        parser.add_argument("--drop-expired", action="store_true", help="also apply the retention")

    def run(self, **options):
        result = {"created": partitions_create()}
        if options["drop_expired"]:
            retention = partitions_drop_expired()
            result.update(dropped=retention.dropped, kept=retention.kept)
        return result
