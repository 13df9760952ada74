"""How the hosted pay page shows amounts and time: Babel for digits and grouping, the currency's own symbol."""

from decimal import Decimal

from babel.numbers import format_decimal

from apps.currencies.models import Currency

NBSP = "\u00a0"


def format_amount(amount: int, currency: Currency, locale: str = "en") -> str:
    """Minor units → '₱1,234.56', '¥1,235', 'د.ك. 1.250'. Exact: scaleb on an int Decimal never rounds."""
    digits = currency.minor_unit
    pattern = "#,##0" + ("." + "0" * digits if digits else "")
    number = format_decimal(Decimal(amount).scaleb(-digits), format=pattern, locale=locale)
    symbol = currency.symbol or currency.code
    return f"{symbol}{NBSP if len(symbol) > 1 else ''}{number}"


def format_duration(seconds: int) -> str:
    """'9 min 59 s', '1 h 05 min', '0 s' — the server-rendered time left (the page script keeps it ticking)."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"
