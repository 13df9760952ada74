from apps.currencies.models import Currency


def currency_list() -> list[Currency]:
    return list(Currency.objects.order_by("code"))


def currency_get(code: str) -> Currency | None:
    return Currency.objects.filter(code=code).first()
