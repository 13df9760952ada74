"""Merchants, apps, keys, products and platform keys. Writes only; reads are in selectors.py."""

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction
from django.utils import timezone

from apps.common import audit, crypto, signing
from apps.currencies.models import Currency
from apps.ledger.models import MERCHANT_KINDS, LedgerAccount
from apps.merchants.models import App, Merchant, MerchantCurrency, MerchantKey, MerchantProduct, PlatformKey, Product

# Defaults in major units, scaled by the currency's minor_unit when a currency's products are created.
DEFAULT_COLLECTION_MIN_MAJOR = 1
DEFAULT_COLLECTION_MAX_MAJOR = 50_000
DEFAULT_PAYOUT_MIN_MAJOR = 1
DEFAULT_PAYOUT_MAX_MAJOR = 500_000
DEFAULT_PAYOUT_FEE_FIXED_MAJOR = 10
DEFAULT_REVIEW_THRESHOLD_MAJOR = 50_000
# Four eyes: two reviewers at or above this. Well below the payout product's maximum (DEFAULT_PAYOUT_MAX_MAJOR): at
# the maximum itself only a payout of exactly the largest size would ever need a second reviewer
# (docs/back-office.md, "Two-approval threshold").
DEFAULT_DUAL_APPROVAL_THRESHOLD_MAJOR = 200_000


class MerchantInputError(ValueError):
    """Bad input to a merchant operation (CLI and admin show the message)."""


def _major(amount: int, currency: Currency) -> int:
    return amount * 10**currency.minor_unit


def product_defaults_ensure(*, currency: Currency) -> list[Product]:
    """The default products of a currency: D0 and D1 collection, and payout. Idempotent."""
    specs = [
        (f"{currency.code}_COLLECT_D0", Product.Kind.COLLECTION, Product.Settlement.D0, 0,
         DEFAULT_COLLECTION_MIN_MAJOR, DEFAULT_COLLECTION_MAX_MAJOR),
        (f"{currency.code}_COLLECT_D1", Product.Kind.COLLECTION, Product.Settlement.D1, 0,
         DEFAULT_COLLECTION_MIN_MAJOR, DEFAULT_COLLECTION_MAX_MAJOR),
        (f"{currency.code}_PAYOUT", Product.Kind.PAYOUT, "", DEFAULT_PAYOUT_FEE_FIXED_MAJOR,
         DEFAULT_PAYOUT_MIN_MAJOR, DEFAULT_PAYOUT_MAX_MAJOR),
    ]
    # Missing ones in one statement; a product already there is kept as edited (ON CONFLICT DO NOTHING).
    Product.objects.bulk_create(
        [Product(code=code, kind=kind, currency=currency, settlement=settlement, fee_fixed=_major(fee_fixed, currency),
                 fee_rate_bps=0, min_amount=_major(min_major, currency), max_amount=_major(max_major, currency))
         for code, kind, settlement, fee_fixed, min_major, max_major in specs],
        ignore_conflicts=True)
    products = Product.objects.in_bulk([spec[0] for spec in specs], field_name="code")
    return [products[spec[0]] for spec in specs]


def public_key_check(pem: str) -> str:
    """A merchant's RSA public key as PEM, or MerchantInputError; returns its fingerprint."""
    try:
        signing.load_public_key(pem)
    except ValueError as exc:
        raise MerchantInputError(f"public key refused: {exc}") from None
    return signing.fingerprint(pem)


_callback_url_validator = URLValidator(schemes=["http", "https"])


def callback_url_check(url: str) -> str:
    """A callback URL is empty (none configured) or an absolute http(s) URL (docs/api.md, "Callbacks")."""
    url = url.strip()
    if url:
        try:
            _callback_url_validator(url)
        except ValidationError:
            raise MerchantInputError(f"callback URL must be an absolute http(s) URL: {url}") from None
    return url


@dataclass
class MerchantCreated:
    merchant: Merchant
    app: App
    key: MerchantKey
    products: list[Product]
    currencies: list[MerchantCurrency]


@transaction.atomic(durable=True)
def merchant_create(*, name: str, public_key_pem: str, currencies: list[str], collection_callback_url: str = "",
                    payout_callback_url: str = "", actor: AbstractBaseUser | None = None) -> MerchantCreated:
    """A merchant with one app, key version 1 and, per currency, its default products and review threshold."""
    if not name.strip():
        raise MerchantInputError("name must not be empty")
    if len(name.strip()) > Merchant._meta.get_field("name").max_length:
        raise MerchantInputError("name must be at most 128 characters")
    collection_callback_url = callback_url_check(collection_callback_url)
    payout_callback_url = callback_url_check(payout_callback_url)
    fingerprint = public_key_check(public_key_pem)
    known = {c.code: c for c in Currency.objects.filter(code__in=currencies)}
    unknown = [code for code in currencies if code not in known]
    if unknown or not currencies:
        raise MerchantInputError(f"unknown currency: {', '.join(unknown) or '(none given)'}")
    merchant = Merchant.objects.create(
        merchant_no=f"tmp-{timezone.now().timestamp()}", name=name.strip(),
        collection_callback_url=collection_callback_url, payout_callback_url=payout_callback_url,
    )
    merchant.merchant_no = f"M{10_000_000 + merchant.pk}"
    merchant.save(update_fields=["merchant_no"])
    app = App.objects.create(merchant=merchant, app_id=f"tmp-{merchant.pk}", name="default")
    app.app_id = f"A{10_000_000 + app.pk}"
    app.save(update_fields=["app_id"])
    key = MerchantKey.objects.create(merchant=merchant, version=1, public_key_pem=public_key_pem.strip() + "\n",
                                     fingerprint=fingerprint)
    products, enabled = [], []
    for code in dict.fromkeys(currencies):
        currency = known[code]
        for product in product_defaults_ensure(currency=currency):
            MerchantProduct.objects.create(merchant=merchant, product=product)
            products.append(product)
        # The merchant's accounts opened now, so postings find them locked-ready: one INSERT, the merchant is new.
        LedgerAccount.objects.bulk_create([LedgerAccount(merchant=merchant, currency=currency, kind=kind)
                                           for kind in MERCHANT_KINDS])
        enabled.append(MerchantCurrency.objects.create(
            merchant=merchant, currency=currency,
            payout_review_threshold=_major(DEFAULT_REVIEW_THRESHOLD_MAJOR, currency),
            payout_dual_approval_threshold=_major(DEFAULT_DUAL_APPROVAL_THRESHOLD_MAJOR, currency)))
    audit.record(actor=actor, actor_label=None if actor else "cli", action="merchant.create", obj=merchant,
                 new={"merchant_no": merchant.merchant_no, "currencies": list(dict.fromkeys(currencies))})
    return MerchantCreated(merchant, app, key, products, enabled)


@transaction.atomic(durable=True)
def merchant_key_add(*, merchant_no: str, public_key_pem: str, actor=None) -> MerchantKey:
    """The next key version; older versions keep verifying until revoked. The CLI's entry (docs/api.md, "Operations
    CLI"); in the admin an upload is a staff request approved by a second person."""
    return merchant_key_add_in_transaction(merchant_no=merchant_no, public_key_pem=public_key_pem, actor=actor)


def merchant_key_add_in_transaction(*, merchant_no: str, public_key_pem: str, actor=None,
                                    live_from=None) -> MerchantKey:
    """The key upload inside the caller's transaction (an approved staff request, apps.common.staff_requests).
    `live_from`: the version verifies only from then (a portal upload waiting for a second owner); None: at once."""
    merchant = Merchant.objects.select_for_update().filter(merchant_no=merchant_no).first()
    if merchant is None:
        raise MerchantInputError(f"unknown merchant {merchant_no}")
    fingerprint = public_key_check(public_key_pem)
    last = merchant.keys.order_by("-version").values_list("version", flat=True).first() or 0
    key = MerchantKey.objects.create(merchant=merchant, version=last + 1, public_key_pem=public_key_pem.strip() + "\n",
                                     fingerprint=fingerprint, live_from=live_from)
    audit.record(actor=actor, actor_label=None if actor else "cli", action="merchant_key.add", obj=key,
                 new={"version": key.version, "fingerprint": fingerprint,
                      **({"live_from": live_from.isoformat()} if live_from else {})})
    return key


@transaction.atomic(durable=True)
def merchant_key_revoke(*, merchant_no: str, key_version: int, actor=None) -> MerchantKey:
    key = MerchantKey.objects.select_for_update().filter(merchant__merchant_no=merchant_no, version=key_version).first()
    if key is None:
        raise MerchantInputError(f"merchant {merchant_no} has no key version {key_version}")
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        audit.record(actor=actor, actor_label=None if actor else "cli", action="merchant_key.revoke", obj=key,
                     new={"version": key.version})
    return key


@transaction.atomic(durable=True)
def platform_key_rotate(*, actor=None) -> PlatformKey:
    """Make a new platform key version current (previous + 1). Old public keys stay published."""
    current = PlatformKey.objects.select_for_update().filter(is_current=True).first()
    last = PlatformKey.objects.order_by("-version").values_list("version", flat=True).first() or 0
    private_key = signing.generate_private_key()
    if current:
        current.is_current = False
        current.save(update_fields=["is_current"])
    key = PlatformKey.objects.create(
        version=last + 1,
        public_key_pem=signing.public_key_to_pem(private_key.public_key()),
        private_key_encrypted=crypto.encrypt(signing.private_key_to_pem(private_key)),
        is_current=True,
    )
    audit.record(actor=actor, actor_label=None if actor else "cli", action="platform_key.rotate", obj=key,
                 old={"version": current.version if current else None}, new={"version": key.version})
    return key


def platform_key_ensure() -> PlatformKey:
    """The current platform key, created as version 1 when there is none (bootstrap)."""
    return PlatformKey.objects.filter(is_current=True).first() or platform_key_rotate()
