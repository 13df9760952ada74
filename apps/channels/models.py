from django.db import models

from apps.common.history import tracked
from apps.currencies.models import Currency


# The credentials stay out of the settings trail (encrypted or not): a change of them is an audit row without values.
@tracked(exclude=("secret_key_encrypted", "callback_token_encrypted"))
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
    # Routing (docs/channels.md, "Routing"): what the channel serves besides its currency and direction. Money
    # settings like the rest of the row: changed through a staff request (four eyes).
    weight = models.PositiveSmallIntegerField(
        default=100, help_text="Among healthy channels of the same priority, new orders are shared by weight.")
    min_amount = models.BigIntegerField(null=True, blank=True,
                                        help_text="Smallest amount (minor units) it serves; empty: no minimum.")
    max_amount = models.BigIntegerField(null=True, blank=True,
                                        help_text="Largest amount (minor units) it serves; empty: no maximum.")
    bank_codes = models.JSONField(default=list, blank=True,
                                  help_text='Payouts: the bank codes it serves, e.g. ["GCASH", "BDO"]; empty: all.')
    is_draining = models.BooleanField(
        default=False, help_text="Drained: takes no new orders (orders already on it finish there).")
    # Upstream credentials (docs/channels.md), set in the admin, Fernet-encrypted at rest (apps.common.crypto) and
    # never shown again in clear. Empty for the sandbox.
    api_base_url = models.URLField(blank=True, help_text="Upstream API root; empty: the adapter's default.")
    secret_key_encrypted = models.TextField(blank=True, editable=False)
    callback_token_encrypted = models.TextField(blank=True, editable=False)

    class Meta:
        ordering = ["currency", "direction", "priority", "code"]

    def __str__(self) -> str:
        return self.code

    def clean(self) -> None:
        from django.conf import settings
        from django.core.exceptions import ValidationError

        if self.api_base_url and not settings.CHANNEL_API_BASE_URL_OVERRIDE:
            raise ValidationError({"api_base_url": "This deployment talks only to the upstream's own API root "
                                                   "(CHANNEL_API_BASE_URL_OVERRIDE is off); leave it empty."})
        if self.min_amount is not None and self.max_amount is not None and self.min_amount > self.max_amount:
            raise ValidationError({"max_amount": "The maximum is below the minimum."})
        if self.bank_codes in (None, ""):
            self.bank_codes = []
        if not isinstance(self.bank_codes, list) or not all(isinstance(c, str) for c in self.bank_codes):
            raise ValidationError({"bank_codes": 'A JSON list of bank codes, e.g. ["GCASH", "BDO"].'})
        if self.bank_codes and self.direction != self.Direction.PAYOUT:
            raise ValidationError({"bank_codes": "Only a payout channel serves bank codes."})
        self._adapter_check()
        self._upstream_check()

    # What an upstream's configuration check depends on (apps.channels.services.channel_upstream_check).
    UPSTREAM_CONFIGURATION = ("adapter", "direction", "currency_id", "api_base_url", "secret_key_encrypted",
                              "is_active")

    def _upstream_check(self) -> None:
        from apps.channels.services import channel_upstream_check

        # Only a configuration the upstream has not seen yet is asked about: a deactivation, a drain or a new
        # priority never waits on (or is refused by) an upstream that is down.
        stored = type(self).objects.filter(pk=self.pk).first() if self.pk else None
        if self.is_active and (stored is None or any(getattr(stored, name) != getattr(self, name)
                                                     for name in self.UPSTREAM_CONFIGURATION)):
            channel_upstream_check(channel=self)

    def _adapter_check(self) -> None:
        from apps.channels.services import channel_adapter_check

        # Deactivating a channel this deployment may not use (a sandbox row in a live deployment) is always allowed.
        if self._state.adding or self.is_active:
            channel_adapter_check(adapter=self.adapter, direction=self.direction)

    def save(self, *args, **kwargs) -> None:
        # Whoever registers or activates a channel (admin, shell, bootstrap), a live deployment takes no sandbox one.
        self._adapter_check()
        super().save(*args, **kwargs)

    @property
    def secret_key(self) -> str:
        return _decrypt(self.secret_key_encrypted)

    @property
    def callback_token(self) -> str:
        return _decrypt(self.callback_token_encrypted)

    def set_credentials(self, *, secret_key: str | None = None, callback_token: str | None = None) -> None:
        """Replace the given credentials (None keeps the stored one); stored encrypted only."""
        from apps.common.crypto import encrypt

        if secret_key is not None:
            self.secret_key_encrypted = encrypt(secret_key.encode()) if secret_key else ""
        if callback_token is not None:
            self.callback_token_encrypted = encrypt(callback_token.encode()) if callback_token else ""


    def serves(self, *, amount: int, bank_code: str | None = None) -> bool:
        """Whether the channel takes an order of this amount (and, for a payout, this bank code)."""
        if self.min_amount is not None and amount < self.min_amount:
            return False
        if self.max_amount is not None and amount > self.max_amount:
            return False
        return not (bank_code is not None and self.bank_codes and bank_code not in self.bank_codes)


class ChannelHealth(models.Model):
    """A channel's circuit breaker state, shared by every process (docs/channels.md, "Health"). Written only on a
    transition (closed -> open, open -> open again after a failed probe, open -> closed), never per order: the
    failure and success counts live in the cache (Redis). Half-open is not stored: an open circuit whose cool-down
    has passed admits a few probes. It feeds the route's reference cache, hence the generation trigger."""

    class State(models.TextChoices):
        CLOSED = "closed", "Closed (healthy)"
        OPEN = "open", "Open (failing)"

    channel = models.OneToOneField(Channel, on_delete=models.CASCADE, primary_key=True, related_name="health")
    state = models.CharField(max_length=8, choices=State.choices, default=State.CLOSED)
    opened_at = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(max_length=255, blank=True, help_text="What opened the circuit last.")
    changed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "channel health"

    def __str__(self) -> str:
        return f"{self.channel_id} {self.state}"


def _decrypt(token: str) -> str:
    from apps.common.crypto import decrypt

    return decrypt(token).decode() if token else ""


# An upstream payment in one of these statuses will not change; reconciliation stops asking about it.
UPSTREAM_PAYIN_FINAL = ("PAID", "SETTLED", "EXPIRED")


class UpstreamPayin(models.Model):
    """The payment a real upstream opened for a collection order (a Xendit invoice): one per platform_order_no,
    so every opening of pay_url forwards the payer to the same upstream page. upstream_status is the last final
    status the upstream reported, after which reconciliation stops asking."""

    channel = models.ForeignKey(Channel, on_delete=models.PROTECT, related_name="upstream_payins")
    platform_order_no = models.CharField(max_length=64)
    reference = models.CharField(max_length=128)
    redirect_url = models.URLField(max_length=1024)
    upstream_status = models.CharField(max_length=32, blank=True)
    # How the payer paid, in the upstream's words ("gcash", "card", "QRPH"), once it says: its refund rules follow it.
    payment_method = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["platform_order_no"], name="upstream_payin_one_per_order")]
        # The ones whose upstream status is not known final: reconciliation's and the stuck count's (apps/collection/
        # sweep.py) only rows, however many pay-ins were opened.
        indexes = [models.Index(fields=["created_at"], condition=~models.Q(upstream_status__in=UPSTREAM_PAYIN_FINAL),
                                name="upstream_payin_unfinished")]

    def __str__(self) -> str:
        return self.reference


class UpstreamSubmissionLease(models.Model):
    """Who is submitting an order upstream right now (apps.channels.paymongo): a short lease claimed and released in
    transactions of their own around "look the upstream's object up, then create it", so two of our workers never
    both find nothing and both send, without holding a transaction (or a session advisory lock, which PgBouncer's
    transaction pooling would break) across the HTTP calls. A holder that died leaves a lease that simply expires."""

    platform_order_no = models.CharField(max_length=64)
    leased_until = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["platform_order_no"], name="upstream_submission_lease_one")]

    def __str__(self) -> str:
        return self.platform_order_no


@tracked()
class BankCode(models.Model):
    """The bank code table (docs/api.md, "Endpoints"): banks and wallets per currency."""

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
        # The payout sweeper's look for returns that were lost (apps/payout/sweep.py): the returned ones only.
        indexes = [models.Index(fields=["created_at"], condition=models.Q(outcome="paid_then_returned"),
                                name="sandbox_disbursement_returned")]

    def __str__(self) -> str:
        return self.reference


@tracked()
class RefundRule(models.Model):
    """A channel's refund rule for one payment method (reference data, docs/channels.md, "Refund rules"): whether its
    payments can be refunded, in parts or only in full, and for how long after payment. The row with an empty method
    holds for every method without a row of its own. A channel with no rows uses its adapter's `refund_rules`."""

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="refund_rules")
    method = models.CharField(max_length=32, blank=True,
                              help_text="The upstream's name of the payment method (e.g. 'gcash', 'QRPH'); empty: "
                                        "every method without a rule of its own.")
    refundable = models.BooleanField(default=True, help_text="Off: payments by this method cannot be refunded.")
    partial = models.BooleanField(default=True, help_text="Off: only one refund, of the whole amount paid.")
    window_days = models.PositiveIntegerField(null=True, blank=True,
                                              help_text="Days after payment within which a refund can be made; "
                                                        "empty: no limit.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["channel", "method"], name="refund_rule_one_per_method")]

    def __str__(self) -> str:
        return f"{self.channel.code} {self.method or 'every method'}"
