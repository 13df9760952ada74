from django.db import models

from apps.common.history import tracked
from apps.currencies.models import Currency


@tracked()
class Channel(models.Model):
    """An upstream provider route: which adapter serves which currency in which direction."""

    class Direction(models.TextChoices):
        PAYIN = "payin", "Pay-in"
        PAYOUT = "payout", "Payout"

    code = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=128)
    adapter = models.CharField(max_length=64, help_text="Registered adapter name, e.g. 'sandbox'.")
    direction = models.CharField(max_length=8, choices=Direction.choices)
    currency = models.ForeignKey(Currency, on_delete=models.PROTECT, related_name="channels")
    is_active = models.BooleanField(default=True)
    priority = models.PositiveSmallIntegerField(default=100, help_text="Lower is tried first.")

    class Meta:
        ordering = ["currency", "direction", "priority", "code"]

    def __str__(self) -> str:
        return self.code


@tracked()
class BankCode(models.Model):
    """The bank code table of interface §4.5: banks and wallets per currency."""

    class Kind(models.TextChoices):
        BANK = "bank", "Bank"
        EWALLET = "ewallet", "E-wallet"

    currency = models.ForeignKey(Currency, on_delete=models.PROTECT, related_name="bank_codes")
    code = models.CharField(max_length=32)
    name = models.CharField(max_length=128)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.BANK)
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["currency", "code"]
        constraints = [models.UniqueConstraint(fields=["currency", "code"], name="bank_code_unique_per_currency")]

    def __str__(self) -> str:
        return f"{self.currency_id}:{self.code}"


class SandboxDisbursement(models.Model):
    """The sandbox "bank"'s own record of a disbursement it accepted: one per platform_order_no, the upstream
    idempotency key (apps.channels.base.PayoutAdapter), so a re-submitted payout is paid once."""

    platform_order_no = models.CharField(max_length=64)
    reference = models.CharField(max_length=128)
    outcome = models.CharField(max_length=32)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # A constraint, not unique=True: the one index the key needs, without PostgreSQL's LIKE copy.
        constraints = [models.UniqueConstraint(fields=["platform_order_no"], name="sandbox_disbursement_one_per_order")]

    def __str__(self) -> str:
        return self.reference
