from apps.collection.services import collection_settlement_release
from apps.common.management.json_command import JsonCommand


class Command(JsonCommand):
    help = "Run the D1 release now: settling credits paid before today's 00:00 (SETTLEMENT_TIME_ZONE) to available."

    def run(self, **options):
        return collection_settlement_release()
