"""Amounts in minor units shown to people: Babel for digits and grouping, the currency's own symbol and scale."""

from decimal import Decimal

from babel.numbers import format_decimal

from apps.currencies.models import Currency

NBSP = "\u00a0"


def format_minor(amount: int, currency: Currency, locale: str = "en") -> str:
    """Minor units → '₱1,234.56', '¥1,234,567', 'د.ك. 1.250'. Exact: scaleb on an int Decimal never rounds."""
    digits = currency.minor_unit
    pattern = "#,##0" + ("." + "0" * digits if digits else "")
    number = format_decimal(Decimal(amount).scaleb(-digits), format=pattern, locale=locale)
    symbol = currency.symbol or currency.code
    return f"{symbol}{NBSP if len(symbol) > 1 else ''}{number}"


def money(amount: int, currency: Currency) -> str:
    """Major units with the currency's own scale and symbol, then its code: '₱50,000.00 PHP'."""
    text = format_minor(amount, currency)
    return text if text.startswith(currency.code) else f"{text} {currency.code}"
