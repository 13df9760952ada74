from apps.channels.services import channels_reconcile
from apps.common.management.json_command import JsonCommand


class Command(JsonCommand):
    help = ("Ask real upstreams about payouts PROCESSING too long and pay-ins past expiry; apply what lost webhooks "
            "left open. Prints what changed as one JSON object.")

    def run(self, **options):
        return channels_reconcile()
