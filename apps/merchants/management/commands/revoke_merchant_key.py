from apps.common.management.json_command import JsonCommand
from apps.merchants.services import merchant_key_revoke


class Command(JsonCommand):
    help = "Revoke a merchant key version: requests signed with it get 1104."

    def add_arguments(self, parser):
        parser.add_argument("merchant_no")
        parser.add_argument("key_version", type=int)

    def run(self, **options):
        key = merchant_key_revoke(merchant_no=options["merchant_no"], key_version=options["key_version"])
        return {"merchant_no": options["merchant_no"], "key_version": key.version,
                "revoked_at": int(key.revoked_at.timestamp())}
