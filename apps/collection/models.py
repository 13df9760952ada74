"""Collection (pay-in) orders (docs/api.md, "Collection orders")."""

import secrets
import string

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django_fsm import FSMField, transition

from apps.channels.models import Channel
from apps.currencies.models import Currency
from apps.ledger.models import Hold, NextHoldId
from apps.merchants.models import Merchant, Product

DEFAULT_EXPIRE_SECONDS = 600
MIN_EXPIRE_SECONDS = 60
MAX_EXPIRE_SECONDS = 86400
_ALPHANUMERIC = string.ascii_letters + string.digits


def random_alphanumerics(length: int) -> str:
    """`length` characters drawn uniformly and independently from [A-Za-z0-9], from the OS's CSPRNG: each random byte
    below 248 (= 4 × 62) gives one character (byte % 62), the others are discarded, so no character is more likely
    than another. What `secrets.choice` per character gives, for a fifth of its CPU (16 calls were ~17 µs of
    pay/create's; docs/performance.md, "Measured changes")."""
    chars: list[str] = []
    while len(chars) < length:
        chars.extend(_ALPHANUMERIC[byte % 62] for byte in secrets.token_bytes(length + 4) if byte < 248)
    return "".join(chars[:length])


def new_platform_order_no() -> str:
    """'C' + UTC time to the second + 16 random alphanumerics (~95 bits): sortable to a reader, not guessable."""
    return "C" + timezone.now().strftime("%Y%m%d%H%M%S") + random_alphanumerics(16)


def new_refund_no() -> str:
    """'R' + UTC time to the second + 16 random alphanumerics, as platform_order_no (docs/api.md, "Refunds")."""
    return "R" + timezone.now().strftime("%Y%m%d%H%M%S") + random_alphanumerics(16)


def new_pay_token() -> str:
    """The secret path segment of pay_url: 192 random bits (at least 128 keep it unguessable; docs/api.md,
    "Endpoints")."""
    return secrets.token_urlsafe(24)


class CollectionOrder(models.Model):
    class Status(models.TextChoices):
        CREATED = "CREATED", "Created"
        SUCCESS = "SUCCESS", "Success"
        EXPIRED = "EXPIRED", "Expired"

    # No index of its own: collection_mch_order_no_unique starts with merchant (docs/ledger.md, Indexes).
    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="collection_orders", db_index=False)
    platform_order_no = models.CharField(max_length=64, default=new_platform_order_no, editable=False)  # unique below
    mch_order_no = models.CharField(max_length=64)
    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="collection_orders")
    # Copied from the product at create time: later product edits never change an existing order's money.
    settlement = models.CharField(max_length=2, choices=Product.Settlement.choices)
    channel = models.ForeignKey(Channel, on_delete=models.PROTECT, related_name="collection_orders")
    # Why the route chose the channel ("priority 1", "failover: XENDIT_A circuit open"; docs/channels.md).
    route_reason = models.CharField(max_length=255, blank=True)
    currency = models.ForeignKey(Currency, on_delete=models.PROTECT, db_index=False)
    amount = models.BigIntegerField(help_text="Minor units.")
    fee = models.BigIntegerField(help_text="Minor units; product fee computed at create time.")
    subject = models.CharField(max_length=256, blank=True)
    return_url = models.CharField(max_length=512, blank=True)
    attach = models.CharField(max_length=512, blank=True)
    expire_seconds = models.PositiveIntegerField(default=DEFAULT_EXPIRE_SECONDS)
    # Not `protected=True`: django-fsm's refresh_from_db workaround flips that flag class-wide, which races in
    # threaded workers. Status changes only through the transitions below, called by apps.collection.services.
    status = FSMField(max_length=16, choices=Status.choices, default=Status.CREATED)  # indexed below
    # No plain index on expire_at or paid_at, none on status that holds CREATED orders (indexes below): an index
    # entry written by every pay/create that no query reads (docs/ledger.md, "Indexes on the hot write tables").
    expire_at = models.DateTimeField()
    paid_at = models.DateTimeField(null=True, blank=True)
    # D1 only: when the settling credit was moved to available (exactly once, docs/api.md, "Collection orders").
    settled_at = models.DateTimeField(null=True, blank=True)
    pay_token = models.CharField(max_length=64, default=new_pay_token, editable=False)  # unique below
    upstream_reference = models.CharField(max_length=128, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)  # indexed below (covering)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["platform_order_no"], name="collection_platform_order_no_unique"),
            models.UniqueConstraint(fields=["pay_token"], name="collection_pay_token_unique"),
            models.UniqueConstraint(fields=["merchant", "mch_order_no"], name="collection_mch_order_no_unique"),
            models.CheckConstraint(condition=Q(amount__gt=0) & Q(fee__gte=0) & Q(fee__lt=models.F("amount")),
                                   name="collection_amount_exceeds_fee"),
            models.CheckConstraint(condition=Q(status="SUCCESS", paid_at__isnull=False)
                                   | (~Q(status="SUCCESS") & Q(paid_at__isnull=True)),
                                   name="collection_paid_at_iff_success"),
            models.CheckConstraint(condition=Q(settled_at__isnull=True) | Q(status="SUCCESS", settlement="D1"),
                                   name="collection_settled_only_d1_success"),
        ]
        indexes = [
            # The admin's status filter on finished orders (CREATED ones: collection_open_by_expiry below). Partial, so
            # that pay/create writes no entry in it; the Pay's and the expiry's UPDATE write one either way (a status
            # change is never a HOT update).
            models.Index(fields=["status"], condition=~Q(status="CREATED"), name="collection_finished_status_idx"),
            # The admin's paid_at filter: paid orders only, so that pay/create writes no (NULL) entry in it.
            models.Index(fields=["paid_at"], condition=Q(paid_at__isnull=False), name="collection_paid_at_idx"),
            # The D1 release scan: successful D1 orders not yet released.
            # Also the settling-awaiting-release figure (/metrics, operations overview), index-only by its INCLUDE.
            models.Index(fields=["paid_at"], condition=Q(settlement="D1", status="SUCCESS", settled_at__isnull=True),
                         include=["currency", "amount"], name="collection_d1_unreleased"),
            # created_at ranges (admin, today's and the last 24 h's figures of the operations overview): replaces the
            # plain created_at index; INCLUDE makes the overview's per-currency sums index-only scans.
            models.Index(fields=["created_at"], include=["currency", "status", "amount"],
                         name="collection_created_cover_idx"),
            # Orders still open, by expiry: the expiry task's scan and the stranded-order counts (apps/collection/
            # sweep.py), which read only the CREATED rows, however many orders are finished.
            models.Index(fields=["expire_at"], condition=Q(status="CREATED"), name="collection_open_by_expiry"),
            # One merchant's orders newest first (the merchant portal's list, keyset on (created_at, id), its CSV and
            # today's figures): a page reads a page of entries, however many orders this or another merchant has.
            models.Index(fields=["merchant", "created_at", "id"], name="collection_by_merchant_created"),
        ]

    def __str__(self) -> str:
        return self.platform_order_no

    @property
    def net_amount(self) -> int:
        """What the merchant is credited: amount − fee."""
        return self.amount - self.fee

    @property
    def pay_url(self) -> str:
        return f"{settings.PAY_BASE_URL}/pay/{self.pay_token}"

    def is_payable(self, now=None) -> bool:
        """The hosted page takes a payment only while CREATED and before expire_at."""
        return self.status == self.Status.CREATED and self.expire_at > (now or timezone.now())

    # Transitions change state and fields only (STYLE.md): no ledger, no I/O here.
    @transition(field=status, source=[Status.CREATED, Status.EXPIRED], target=Status.SUCCESS)
    def mark_paid(self, *, paid_at, upstream_reference: str = "") -> None:
        self.paid_at = paid_at
        if upstream_reference:
            self.upstream_reference = upstream_reference

    @transition(field=status, source=Status.CREATED, target=Status.EXPIRED)
    def expire(self) -> None:
        pass


class Refund(models.Model):
    """Money given back to the payer of a paid pay-in, in full or in part (docs/api.md, "Refunds"). Its amount is held
    (available → frozen) from create until the channel's answer: SUCCESS lets it leave, FAILED gives it back."""

    class Status(models.TextChoices):
        PROCESSING = "PROCESSING", "Processing"
        SUCCESS = "SUCCESS", "Success"
        FAILED = "FAILED", "Failed"

    TERMINAL = (Status.SUCCESS, Status.FAILED)

    # No index of its own: refund_mch_refund_no_unique starts with merchant.
    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="refunds", db_index=False)
    order = models.ForeignKey(CollectionOrder, on_delete=models.PROTECT, related_name="refunds")
    refund_no = models.CharField(max_length=64, default=new_refund_no, editable=False)  # unique below
    mch_refund_no = models.CharField(max_length=64)
    # The pay-in's channel: a refund goes back the way the payment came, whatever the routing says now.
    channel = models.ForeignKey(Channel, on_delete=models.PROTECT, related_name="refunds")
    currency = models.ForeignKey(Currency, on_delete=models.PROTECT, db_index=False)
    amount = models.BigIntegerField(help_text="Minor units.")
    reason = models.CharField(max_length=256, blank=True)
    # Not `protected=True`, as CollectionOrder.status: changed only by the transitions below, from apps.collection.
    status = FSMField(max_length=16, choices=Status.choices, default=Status.PROCESSING)
    # The INSERT draws the hold's id (the default) and the hold is placed under it in the same transaction (its foreign
    # key, deferred, is checked at COMMIT): the row is written once, as a payout's.
    hold = models.OneToOneField(Hold, on_delete=models.PROTECT, related_name="refund", null=True, blank=True,
                                db_default=NextHoldId(), help_text="The amount held at create.")
    upstream_reference = models.CharField(max_length=128, blank=True)
    # Set when a drain or the sweep takes the refund to hand it to its channel, committed before the channel is
    # called: a drain takes only refunds without it, so none is sent twice by drains (apps.collection.refunds).
    submitted_at = models.DateTimeField(null=True, blank=True)
    fail_reason = models.CharField(max_length=256, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["refund_no"], name="refund_refund_no_unique"),
            models.UniqueConstraint(fields=["merchant", "mch_refund_no"], name="refund_mch_refund_no_unique"),
            models.CheckConstraint(condition=Q(amount__gt=0), name="refund_amount_positive"),
            models.CheckConstraint(condition=Q(status="PROCESSING", finished_at__isnull=True)
                                   | (~Q(status="PROCESSING") & Q(finished_at__isnull=False)),
                                   name="refund_finished_at_iff_terminal"),
        ]
        indexes = [
            # The sweep's scan: refunds still waiting for their channel, oldest first.
            models.Index(fields=["created_at"], condition=Q(status="PROCESSING"), name="refund_processing_idx"),
        ]

    def __str__(self) -> str:
        return self.refund_no

    # Transitions change state and fields only (STYLE.md): no ledger, no I/O here.
    @transition(field=status, source=Status.PROCESSING, target=Status.SUCCESS)
    def succeed(self, *, upstream_reference: str = "") -> None:
        if upstream_reference:
            self.upstream_reference = upstream_reference
        self.finished_at = timezone.now()

    @transition(field=status, source=Status.PROCESSING, target=Status.FAILED)
    def fail(self, *, reason: str) -> None:
        self.fail_reason = reason[:256]
        self.finished_at = timezone.now()
