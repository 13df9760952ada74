from apps.common.management.json_command import JsonCommand
from apps.merchants.services import platform_key_rotate


class Command(JsonCommand):
    help = "Make a new platform callback key version current (previous + 1)."

    def run(self, **options):
        key = platform_key_rotate()
        return {"platform_key_version": key.version, "platform_public_key": key.public_key_pem}
