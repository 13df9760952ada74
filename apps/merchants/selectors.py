from functools import lru_cache

from cryptography.hazmat.primitives.asymmetric import rsa

from apps.common import crypto, signing
from apps.merchants.models import App, MerchantCurrency, MerchantKey, MerchantProduct, PlatformKey, Product


def merchant_key_for_request(*, merchant_no: str, app_id: str, key_version: int) -> MerchantKey | None:
    """The key a signed request names, with `.merchant` and `.app` attached; None if any part is unknown."""
    app = App.objects.select_related("merchant").filter(app_id=app_id, merchant__merchant_no=merchant_no).first()
    if app is None:
        return None
    key = MerchantKey.objects.filter(merchant_id=app.merchant_id, version=key_version).first()
    if key is None:
        return None
    key.merchant = app.merchant
    key.app = app
    return key


@lru_cache(maxsize=4096)
def public_key_object(pem: str) -> rsa.RSAPublicKey:
    """Parsed public keys, cached per process: parsing PEM costs more than verifying."""
    return signing.load_public_key(pem)


def platform_key_current() -> PlatformKey | None:
    return PlatformKey.objects.filter(is_current=True).first()


@lru_cache(maxsize=64)
def _platform_private_key(version: int, encrypted: str) -> rsa.RSAPrivateKey:
    return signing.load_private_key(crypto.decrypt(encrypted))


def platform_private_key(key: PlatformKey) -> rsa.RSAPrivateKey:
    return _platform_private_key(key.version, key.private_key_encrypted)


def merchant_currency_enabled(*, merchant_id: int, currency: str) -> MerchantCurrency | None:
    return (
        MerchantCurrency.objects.select_related("currency")
        .filter(merchant_id=merchant_id, currency_id=currency, is_enabled=True)
        .first()
    )


def merchant_product(*, merchant_id: int, code: str) -> Product | None:
    """The product if it exists, is active and is enabled for the merchant."""
    link = (
        MerchantProduct.objects.select_related("product")
        .filter(merchant_id=merchant_id, product__code=code, is_enabled=True, product__is_active=True)
        .first()
    )
    return link.product if link else None
