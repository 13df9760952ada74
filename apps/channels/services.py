"""Reference data for channels: the sandbox routes and the bank code table, seeded by `bootstrap`."""

from apps.channels.models import BankCode, Channel
from apps.currencies.models import Currency

# Main banks and e-wallets per seeded currency (codes as commonly used by PH/ID/VN/JP/KW/US payout rails).
SEED_BANK_CODES: dict[str, list[tuple[str, str, str]]] = {
    "PHP": [
        ("BDO", "BDO Unibank", "bank"), ("BPI", "Bank of the Philippine Islands", "bank"),
        ("MBTC", "Metropolitan Bank and Trust", "bank"), ("LBP", "Land Bank of the Philippines", "bank"),
        ("PNB", "Philippine National Bank", "bank"), ("SECB", "Security Bank", "bank"),
        ("UBP", "UnionBank of the Philippines", "bank"), ("RCBC", "Rizal Commercial Banking Corporation", "bank"),
        ("CBC", "China Banking Corporation", "bank"), ("GCASH", "GCash", "ewallet"), ("MAYA", "Maya", "ewallet"),
        ("GRABPAY", "GrabPay", "ewallet"),
    ],
    "USD": [("CHASE", "JPMorgan Chase", "bank"), ("BOFA", "Bank of America", "bank"), ("CITI", "Citibank", "bank")],
    "IDR": [("BCA", "Bank Central Asia", "bank"), ("BRI", "Bank Rakyat Indonesia", "bank"),
            ("MANDIRI", "Bank Mandiri", "bank"), ("OVO", "OVO", "ewallet"), ("DANA", "DANA", "ewallet")],
    "VND": [("VCB", "Vietcombank", "bank"), ("TCB", "Techcombank", "bank"), ("MOMO", "MoMo", "ewallet")],
    "JPY": [("MUFG", "MUFG Bank", "bank"), ("SMBC", "Sumitomo Mitsui Banking", "bank"), ("MIZUHO", "Mizuho Bank", "bank")],
    "KWD": [("NBK", "National Bank of Kuwait", "bank"), ("KFH", "Kuwait Finance House", "bank")],
}


def channels_seed(*, currencies: list[Currency]) -> list[Channel]:
    """A sandbox pay-in and payout channel per currency. Idempotent; existing rows are left as edited."""
    seeded = []
    for currency in currencies:
        for direction in Channel.Direction:
            channel, _ = Channel.objects.get_or_create(
                code=f"SANDBOX_{currency.code}_{direction.value.upper()}",
                defaults={"name": f"Sandbox {currency.code} {direction.label}", "adapter": "sandbox",
                          "direction": direction, "currency": currency},
            )
            seeded.append(channel)
    return seeded


def bank_codes_seed(*, currencies: list[Currency]) -> dict[str, list[str]]:
    for currency in currencies:
        for code, name, kind in SEED_BANK_CODES.get(currency.code, []):
            BankCode.objects.get_or_create(currency=currency, code=code, defaults={"name": name, "kind": kind})
    return {
        currency.code: list(BankCode.objects.filter(currency=currency, is_active=True).values_list("code", flat=True))
        for currency in currencies
    }
