from functools import lru_cache

from cryptography.hazmat.primitives.asymmetric import rsa
from django.db.models import F

from apps.common import crypto, signing
from apps.common.refcache import refcache_get
from apps.merchants.models import App, Merchant, MerchantCurrency, MerchantKey, MerchantProduct, PlatformKey, Product


def merchant_key_for_request(*, merchant_no: str, app_id: str, key_version: int) -> MerchantKey | None:
    """The key a signed request names, with `.merchant` and `.app` attached (cached reference data, else one
    query); None if any part is unknown (an app of another merchant is unknown)."""
    return refcache_get(("merchant_key", merchant_no, app_id, key_version),
                        lambda: _merchant_key_load(merchant_no=merchant_no, app_id=app_id, key_version=key_version))


def _merchant_key_load(*, merchant_no: str, app_id: str, key_version: int) -> MerchantKey | None:
    key = (
        MerchantKey.objects.select_related("merchant")
        .filter(merchant__merchant_no=merchant_no, version=key_version, merchant__apps__app_id=app_id)
        # The filter's join to the named app is reused by these columns (one row, that app's).
        .annotate(app_pk=F("merchant__apps__id"), app_name=F("merchant__apps__name"),
                  app_is_active=F("merchant__apps__is_active"), app_created_at=F("merchant__apps__created_at"))
        .first()
    )
    if key is None:
        return None
    key.app = App.from_db(
        "default", ["id", "merchant_id", "app_id", "name", "is_active", "created_at"],
        [key.app_pk, key.merchant_id, app_id, key.app_name, key.app_is_active, key.app_created_at],
    )
    key.app.merchant = key.merchant
    return key


@lru_cache(maxsize=4096)
def public_key_object(pem: str) -> rsa.RSAPublicKey:
    """Parsed public keys, cached per process: parsing PEM costs more than verifying."""
    return signing.load_public_key(pem)


def platform_key_current() -> PlatformKey | None:
    """The platform's current signing key (cached reference data: a rotation is seen by the next request, task scope
    or callback attempt, apps.common.refcache)."""
    return refcache_get(("platform_key_current",), lambda: PlatformKey.objects.filter(is_current=True).first())


@lru_cache(maxsize=64)
def _platform_private_key(version: int, encrypted: str) -> rsa.RSAPrivateKey:
    return signing.load_private_key(crypto.decrypt(encrypted))


def platform_private_key(key: PlatformKey) -> rsa.RSAPrivateKey:
    return _platform_private_key(key.version, key.private_key_encrypted)


def merchant_cached(merchant_id: int) -> Merchant | None:
    """The merchant by primary key (cached reference data, apps.common.refcache): what a service holding an order's
    merchant_id needs of it (the callback URLs, the name) without joining the merchant into the order's lock."""
    return refcache_get(("merchant", merchant_id), lambda: Merchant.objects.filter(pk=merchant_id).first())


def merchant_currency_enabled(*, merchant_id: int, currency: str) -> MerchantCurrency | None:
    """Cached reference data (apps.common.refcache)."""
    return refcache_get(("merchant_currency", merchant_id, currency), lambda: (
        MerchantCurrency.objects.select_related("currency")
        .filter(merchant_id=merchant_id, currency_id=currency, is_enabled=True)
        .first()
    ))


def merchant_product(*, merchant_id: int, code: str) -> Product | None:
    """The product if it exists, is active and is enabled for the merchant (cached reference data)."""
    def load() -> Product | None:
        link = (
            MerchantProduct.objects.select_related("product")
            .filter(merchant_id=merchant_id, product__code=code, is_enabled=True, product__is_active=True)
            .first()
        )
        return link.product if link else None

    return refcache_get(("merchant_product", merchant_id, code), load)


def merchant_administrator_conflict(*, merchant_no: str, user) -> str:
    """Four eyes: a merchant's own administrator neither asks for nor decides a staff request about it. The words of
    the refusal (apps.common.staff_requests), or "" when this user does not administer the merchant."""
    if merchant_no and Merchant.objects.filter(merchant_no=merchant_no, administrators=user).exists():
        return f"administers merchant {merchant_no}"
    return ""
