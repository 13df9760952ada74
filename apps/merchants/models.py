from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from apps.common.history import tracked
from apps.currencies.models import Currency


@tracked()
class Merchant(models.Model):
    merchant_no = models.CharField(max_length=32, unique=True)
    name = models.CharField(max_length=128)
    is_active = models.BooleanField(default=True, help_text="Disabled merchants get 1105 on every signed call.")
    collection_callback_url = models.URLField(max_length=512, blank=True)
    payout_callback_url = models.URLField(max_length=512, blank=True)
    # Staff who administer this merchant (account managers); they may not decide its payouts' reviews.
    administrators = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="administered_merchants")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["merchant_no"]

    def __str__(self) -> str:
        return f"{self.merchant_no} {self.name}"


@tracked()
class App(models.Model):
    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="apps")
    app_id = models.CharField(max_length=32, unique=True)
    name = models.CharField(max_length=128, blank=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["app_id"]

    def __str__(self) -> str:
        return self.app_id


@tracked()
class MerchantKey(models.Model):
    """A version of the merchant's RSA public key. Older versions verify until revoked (then 1104)."""

    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="keys")
    version = models.PositiveIntegerField()
    public_key_pem = models.TextField()
    fingerprint = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # A version uploaded in the portal verifies only from this moment (docs/portal.md, "Key confirmation"); empty: from
    # its creation.
    live_from = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["merchant", "version"]
        constraints = [models.UniqueConstraint(fields=["merchant", "version"], name="merchant_key_version_unique")]

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def is_live(self, now) -> bool:
        """Verifies signed requests at `now`: not revoked, and live (confirmed, or its waiting time over)."""
        return self.revoked_at is None and (self.live_from is None or self.live_from <= now)

    def __str__(self) -> str:
        return f"{self.merchant.merchant_no} v{self.version}"


@tracked()
class Product(models.Model):
    """A collection or payout product: its currency, settlement (collections), fee and amount bounds."""

    class Kind(models.TextChoices):
        COLLECTION = "collection", "Collection"
        PAYOUT = "payout", "Payout"

    class Settlement(models.TextChoices):
        D0 = "D0", "D0 (credited to available)"
        D1 = "D1", "D1 (settling until next-day release)"

    code = models.CharField(max_length=64, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    currency = models.ForeignKey(Currency, on_delete=models.PROTECT, related_name="products")
    settlement = models.CharField(max_length=2, choices=Settlement.choices, blank=True)
    fee_fixed = models.BigIntegerField(default=0, validators=[MinValueValidator(0)])
    fee_rate_bps = models.PositiveIntegerField(default=0, help_text="Basis points of the amount, rounded up.")
    min_amount = models.BigIntegerField(validators=[MinValueValidator(1)])
    max_amount = models.BigIntegerField(validators=[MinValueValidator(1)])
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["code"]
        constraints = [
            models.CheckConstraint(condition=Q(min_amount__gte=1) & Q(max_amount__gte=models.F("min_amount")),
                                   name="product_amount_bounds"),
            models.CheckConstraint(condition=Q(fee_fixed__gte=0), name="product_fee_fixed_non_negative"),
            models.CheckConstraint(
                condition=(Q(kind="collection") & Q(settlement__in=["D0", "D1"])) | (Q(kind="payout") & Q(settlement="")),
                name="product_settlement_matches_kind",
            ),
        ]

    def __str__(self) -> str:
        return self.code

    def fee_for(self, amount: int) -> int:
        """fee = fee_fixed + ceil(amount × fee_rate_bps / 10000), integers only (docs/api.md, "Collection orders",
        "Payout orders")."""
        return self.fee_fixed + -(-amount * self.fee_rate_bps // 10000)


@tracked()
class MerchantCurrency(models.Model):
    """A currency enabled for a merchant, with its payout review threshold (docs/api.md, "Payout orders")."""

    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="currencies")
    currency = models.ForeignKey(Currency, on_delete=models.PROTECT)
    is_enabled = models.BooleanField(default=True)
    payout_review_threshold = models.BigIntegerField(
        validators=[MinValueValidator(1)], help_text="Payouts at or above this amount (minor units) go to review."
    )
    payout_dual_approval_threshold = models.BigIntegerField(
        validators=[MinValueValidator(1)],
        help_text="Payouts at or above this amount (minor units) need approvals by two different reviewers.",
    )

    class Meta:
        ordering = ["merchant", "currency"]
        constraints = [
            models.UniqueConstraint(fields=["merchant", "currency"], name="merchant_currency_unique"),
            # Four eyes (docs/back-office.md): the two-approval threshold is never below the review threshold.
            models.CheckConstraint(condition=Q(payout_dual_approval_threshold__gte=models.F("payout_review_threshold")),
                                   name="merchant_currency_dual_threshold_gte_review"),
        ]
        verbose_name_plural = "merchant currencies"

    def __str__(self) -> str:
        return f"{self.merchant.merchant_no} {self.currency_id}"


@tracked()
class MerchantProduct(models.Model):
    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="merchant_products")
    product = models.ForeignKey(Product, on_delete=models.PROTECT)
    is_enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["merchant", "product"]
        constraints = [models.UniqueConstraint(fields=["merchant", "product"], name="merchant_product_unique")]

    def __str__(self) -> str:
        return f"{self.merchant.merchant_no} {self.product.code}"


@tracked(exclude=("private_key_encrypted",))
class PlatformKey(models.Model):
    """The platform's callback signing key, by version; exactly one is current. Private half encrypted at rest."""

    version = models.PositiveIntegerField(unique=True)
    public_key_pem = models.TextField()
    private_key_encrypted = models.TextField(editable=False)
    is_current = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["version"]
        constraints = [
            models.UniqueConstraint(fields=["is_current"], condition=Q(is_current=True), name="one_current_platform_key")
        ]

    def __str__(self) -> str:
        return f"platform key v{self.version}{' (current)' if self.is_current else ''}"
