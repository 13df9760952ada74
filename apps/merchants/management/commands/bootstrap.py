from django.db import transaction

from apps.channels.services import bank_codes_seed, channels_seed
from apps.common.management.json_command import JsonCommand
from apps.currencies.services import currency_seed
from apps.merchants.services import platform_key_ensure, product_defaults_ensure


class Command(JsonCommand):
    help = ("Idempotent: currencies, sandbox channels (in a sandbox deployment only, docs/channels.md), bank codes, "
            "default products, a current platform key.")

    def run(self, **options):
        with transaction.atomic():
            currencies = currency_seed()
            channels_seed(currencies=currencies)
            bank_codes = bank_codes_seed(currencies=currencies)
            products = [p.code for c in currencies for p in product_defaults_ensure(currency=c)]
        key = platform_key_ensure()
        return {
            "currencies": [c.code for c in currencies],
            "products": products,
            "bank_codes": bank_codes,
            "platform_key_version": key.version,
        }
