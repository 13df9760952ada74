"""Amounts in minor units shown to people, formatted by Babel with the currency's minor_unit."""

from decimal import Decimal

from babel.numbers import format_currency

from apps.currencies.models import Currency


def format_minor(amount: int, currency: Currency, locale: str = "en") -> str:
    major = Decimal(amount).scaleb(-currency.minor_unit)
    return format_currency(major, currency.code, locale=locale, currency_digits=False,
                           format=f"¤#,##0{'.' + '0' * currency.minor_unit if currency.minor_unit else ''}")
