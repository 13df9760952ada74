from apps.common.management.json_command import JsonCommand, read_text_file
from apps.merchants.selectors import platform_key_current
from apps.merchants.services import merchant_create


def product_json(product) -> dict:
    data = {"code": product.code, "kind": product.kind, "currency": product.currency_id}
    if product.kind == "collection":
        data["settlement"] = product.settlement
    data.update(fee_fixed=product.fee_fixed, fee_rate_bps=product.fee_rate_bps, min_amount=product.min_amount,
                max_amount=product.max_amount)
    return data


class Command(JsonCommand):
    help = "Create a merchant with one app, key version 1 and the default products of each currency."

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True)
        parser.add_argument("--public-key", required=True, help="PEM file (SubjectPublicKeyInfo), RSA >= 2048 bits")
        parser.add_argument("--collection-callback-url", default="")
        parser.add_argument("--payout-callback-url", default="")
        parser.add_argument("--currencies", default="PHP", help="comma-separated, e.g. PHP,USD")

    def run(self, **options):
        created = merchant_create(
            name=options["name"],
            public_key_pem=read_text_file(options["public_key"]),
            currencies=[c.strip().upper() for c in options["currencies"].split(",") if c.strip()],
            collection_callback_url=options["collection_callback_url"],
            payout_callback_url=options["payout_callback_url"],
        )
        platform_key = platform_key_current()
        return {
            "merchant_no": created.merchant.merchant_no,
            "app_id": created.app.app_id,
            "key_version": created.key.version,
            "name": created.merchant.name,
            "collection_callback_url": created.merchant.collection_callback_url,
            "payout_callback_url": created.merchant.payout_callback_url,
            "products": [product_json(p) for p in created.products],
            "review_thresholds": {mc.currency_id: mc.payout_review_threshold for mc in created.currencies},
            "platform_key_version": platform_key.version if platform_key else None,
            "platform_public_key": platform_key.public_key_pem if platform_key else None,
        }
