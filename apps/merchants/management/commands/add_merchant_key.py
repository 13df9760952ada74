from apps.common.management.json_command import JsonCommand, read_text_file
from apps.merchants.services import merchant_key_add


class Command(JsonCommand):
    help = "Add the next key version of a merchant; older versions keep working until revoked."

    def add_arguments(self, parser):
        parser.add_argument("merchant_no")
        parser.add_argument("--public-key", required=True)

    def run(self, **options):
        key = merchant_key_add(merchant_no=options["merchant_no"], public_key_pem=read_text_file(options["public_key"]))
        return {"merchant_no": options["merchant_no"], "key_version": key.version, "fingerprint": key.fingerprint}
