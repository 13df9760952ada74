from apps.channels.models import BankCode
from apps.common.refcache import refcache_get


def bank_code_active(*, currency: str, code: str) -> BankCode | None:
    """The active bank code of the currency's table; None means code 2006. Cached reference data."""
    return refcache_get(("bank_code", currency, code),
                        lambda: BankCode.objects.filter(currency_id=currency, code=code, is_active=True).first())
