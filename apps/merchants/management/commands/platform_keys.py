from apps.common.management.json_command import JsonCommand
from apps.merchants.models import PlatformKey


class Command(JsonCommand):
    help = "Every platform key version with its public key and which one is current."

    def run(self, **options):
        return {"keys": [{"key_version": k.version, "public_key": k.public_key_pem, "current": k.is_current}
                         for k in PlatformKey.objects.order_by("version")]}
