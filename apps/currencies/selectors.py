from apps.common.refcache import refcache_get
from apps.currencies.models import Currency


def currency_list() -> list[Currency]:
    return list(Currency.objects.order_by("code"))


def currency_get(code: str) -> Currency | None:
    """Cached reference data (apps.common.refcache)."""
    return refcache_get(("currency", code), lambda: Currency.objects.filter(code=code).first())
