"""Seeding of currency reference data from Babel's CLDR/ISO 4217 data (names, symbols, minor units)."""

from babel.numbers import get_currency_name, get_currency_precision, get_currency_symbol

from apps.currencies.models import Currency

# The locale whose symbol a payer of that currency recognises (Babel's English symbol is the bare code for some).
SEED_CURRENCY_LOCALES = {
    "PHP": "en_PH",
    "USD": "en_US",
    "IDR": "id_ID",
    "VND": "vi_VN",
    "JPY": "ja_JP",
    "KWD": "ar_KW",
}
_BIDI_MARKS = dict.fromkeys(map(ord, "\u200e\u200f\u061c"), None)


def currency_symbol(code: str) -> str:
    symbol = get_currency_symbol(code, locale="en")
    if symbol == code and code in SEED_CURRENCY_LOCALES:
        symbol = get_currency_symbol(code, locale=SEED_CURRENCY_LOCALES[code]).translate(_BIDI_MARKS)
    return symbol


def currency_seed(*, codes: list[str] | None = None) -> list[Currency]:
    """Create the reference currencies that are missing, in one statement; existing rows (and their `active` flag)
    are kept as they are (ON CONFLICT DO NOTHING)."""
    codes = codes or list(SEED_CURRENCY_LOCALES)
    Currency.objects.bulk_create(
        [Currency(code=code, name=get_currency_name(code, locale="en"), symbol=currency_symbol(code),
                  minor_unit=get_currency_precision(code)) for code in codes],
        ignore_conflicts=True)
    seeded = Currency.objects.in_bulk(codes)
    return [seeded[code] for code in codes]
