"""Payout orders (docs/api.md, "Payout orders") and the admin-managed payee deny list."""

import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django_fsm import FSMField, transition

from apps.channels.models import Channel
from apps.common.history import tracked
from apps.currencies.models import Currency
from apps.ledger.models import Hold, NextHoldId
from apps.merchants.models import Merchant, Product

MASK = "\u2022\u2022\u2022\u2022"  # ••••


def mask_account(account: str) -> str:
    """••••1234: only the last 4 characters, and none at all when the account is that short."""
    return f"{MASK}{account[-4:]}" if len(account) > 4 else MASK


def new_platform_order_no() -> str:
    """Unguessable (128 random bits), [A-Za-z0-9], 42 characters: 'PO' + UTC date + 32 hex digits."""
    return f"PO{timezone.now():%Y%m%d}{secrets.token_hex(16)}"


class Payout(models.Model):
    class Status(models.TextChoices):
        FROZEN = "FROZEN", "Frozen (in review)"
        APPROVED = "APPROVED", "Approved"
        PROCESSING = "PROCESSING", "Processing"
        SUCCESS = "SUCCESS", "Success"
        FAILED = "FAILED", "Failed"
        REJECTED = "REJECTED", "Rejected"

    TERMINAL = (Status.SUCCESS, Status.FAILED, Status.REJECTED)

    # No index of its own: payout_by_merchant_created starts with it (docs/ledger.md, Indexes).
    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="payouts", db_index=False)
    platform_order_no = models.CharField(max_length=64, default=new_platform_order_no, editable=False)  # unique below
    mch_order_no = models.CharField(max_length=64)
    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="payouts")
    currency = models.ForeignKey(Currency, on_delete=models.PROTECT, related_name="payouts", db_index=False)
    channel = models.ForeignKey(Channel, on_delete=models.PROTECT, related_name="payouts",
                                help_text="The payout channel the order is (or was last) submitted to.")
    # Why the route chose the channel ("priority 1", "failover: XENDIT_A refused: HTTP 503"; docs/channels.md).
    route_reason = models.CharField(max_length=255, blank=True)
    # Set when the current channel definitely did not take the disbursement (a definite refusal, or a lookup by our
    # idempotency key that found nothing): only then may the payout move to another channel (docs/channels.md).
    channel_declined_at = models.DateTimeField(null=True, blank=True)
    amount = models.BigIntegerField(help_text="Minor units.")
    fee = models.BigIntegerField(help_text="Minor units; frozen together with the amount.")
    payee_name = models.CharField(max_length=128)
    # The full number leaves the platform only through the channel adapter; everything else shows
    # `masked_payee_account`.
    payee_account = models.CharField(max_length=64)
    bank_code = models.CharField(max_length=32)
    attach = models.CharField(max_length=512, blank=True)

    status = FSMField(max_length=16, choices=Status.choices)
    review_required = models.BooleanField(default=False)
    approvals_required = models.PositiveSmallIntegerField(
        default=1, help_text="Reviewer approvals needed to release a payout in review: 2 at or above the merchant "
                             "currency's two-approval threshold (four eyes).")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                     related_name="requested_payouts", editable=False,
                                     help_text="The staff user who asked for this payout on the merchant's behalf, "
                                               "if any: they may not decide it.")
    risk_reasons = models.JSONField(default=list, blank=True, help_text="Why the order went to review.")
    # The row is inserted first, claiming (merchant, mch_order_no) before any ledger lock (docs/ledger.md, "Lock
    # order"); its INSERT draws the hold's id (the default), and hold_place inserts the hold under that id in the same
    # transaction: the foreign key, deferred, is checked at COMMIT. So the row is written once (no UPDATE of hold_id).
    hold = models.OneToOneField(Hold, on_delete=models.PROTECT, related_name="payout", null=True,
                                db_default=NextHoldId(), help_text="The freeze of amount + fee placed at creation.")

    reviewed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                    related_name="reviewed_payouts")
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_reason = models.TextField(blank=True)

    upstream_reference = models.CharField(max_length=128, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    fail_reason = models.CharField(max_length=255, blank=True)

    reversed_at = models.DateTimeField(null=True, blank=True)
    reversal_amount = models.BigIntegerField(null=True, blank=True)
    fee_refund = models.BigIntegerField(null=True, blank=True)

    created_at = models.DateTimeField(default=timezone.now)  # indexed below (covering)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        permissions = [
            ("review_payout", "Can approve or reject payouts in review"),
            ("reverse_payout", "Can reverse a successful payout"),
        ]
        indexes = [
            # The velocity read (payout_velocity_reason): every condition an index condition, so no plan reads the
            # merchant's whole day. Created after payout_by_merchant_created (0009), which the planner took instead on
            # a table without statistics (their estimates tie at one row; the newer index wins a tie), reading every
            # payout the merchant made in 24 h (docs/performance.md, "Measured changes").
            models.Index(fields=["payee_account", "merchant", "created_at"], name="payout_velocity_payee_idx"),
            models.Index(fields=["status", "created_at"], name="payout_status_created_idx"),
            # Replaces the plain created_at index; INCLUDE: the operations overview's sums are index-only scans.
            models.Index(fields=["created_at"], include=["currency", "status", "amount"],
                         name="payout_created_cover_idx"),
            # The decision page: this payee account's earlier payouts across every merchant.
            models.Index(fields=["payee_account", "created_at"], name="payout_payee_history_idx"),
            # The operations overview's reversals today: reversed payouts only (few), by reversal time.
            models.Index(fields=["reversed_at"], condition=Q(reversed_at__isnull=False),
                         name="payout_reversed_at_idx"),
            # One merchant's payouts newest first (the merchant portal's list, keyset on (created_at, id), its CSV and
            # today's figures): a page reads a page of entries, however many payouts this or another merchant has.
            models.Index(fields=["merchant", "created_at", "id"], name="payout_by_merchant_created"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["platform_order_no"], name="payout_platform_order_no_unique"),
            # mch_order_no first: then no query that names only the merchant can take this index, and the velocity
            # read (payee account, merchant, since) takes payout_velocity_payee_idx, whatever the statistics
            # (tests/payout/test_risk.py).
            models.UniqueConstraint(fields=["mch_order_no", "merchant"], name="payout_mch_order_no_unique"),
            models.CheckConstraint(condition=Q(amount__gt=0) & Q(fee__gte=0), name="payout_amounts_valid"),
            models.CheckConstraint(
                condition=(Q(reversed_at__isnull=True) & Q(reversal_amount__isnull=True) & Q(fee_refund__isnull=True))
                | (Q(reversed_at__isnull=False) & Q(status="SUCCESS") & Q(reversal_amount__gte=1)
                   & Q(reversal_amount__lte=models.F("amount")) & Q(fee_refund__gte=0)
                   & Q(fee_refund__lte=models.F("fee"))),
                name="payout_reversal_bounds",
            ),
        ]

    def __str__(self) -> str:
        return self.platform_order_no

    @property
    def masked_payee_account(self) -> str:
        return mask_account(self.payee_account)

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    # Transitions change state and fields only (STYLE.md): the services do the locking, ledger and outbox.

    @transition(field=status, source=Status.FROZEN, target=Status.APPROVED)
    def approve(self, *, reviewer, reason: str = "") -> None:
        self._reviewed(reviewer, reason)

    @transition(field=status, source=Status.FROZEN, target=Status.REJECTED)
    def reject(self, *, reviewer, reason: str) -> None:
        self._reviewed(reviewer, reason)
        self.fail_reason = reason[:255]
        self.finished_at = timezone.now()

    @transition(field=status, source=Status.APPROVED, target=Status.PROCESSING)
    def submit(self) -> None:
        self.submitted_at = timezone.now()

    @transition(field=status, source=Status.PROCESSING, target=Status.SUCCESS)
    def mark_paid(self) -> None:
        self.finished_at = timezone.now()

    @transition(field=status, source=Status.PROCESSING, target=Status.FAILED)
    def mark_failed(self, *, fail_reason: str) -> None:
        self.fail_reason = fail_reason[:255]
        self.finished_at = timezone.now()

    @transition(field=status, source=Status.SUCCESS, target=Status.SUCCESS,
                conditions=[lambda payout: payout.reversed_at is None])
    def reverse(self, *, reversal_amount: int, fee_refund: int) -> None:
        """docs/api.md, "Payout orders": the status stays SUCCESS; `reversed_at` shows the reversal."""
        self.reversal_amount = reversal_amount
        self.fee_refund = fee_refund
        self.reversed_at = timezone.now()

    def _reviewed(self, reviewer, reason: str) -> None:
        self.reviewed_by = reviewer if getattr(reviewer, "pk", None) else None
        self.reviewed_at = timezone.now()
        self.review_reason = reason


class PayoutApproval(models.Model):
    """One reviewer's decision on a payout in review (four eyes): one row per reviewer and payout.

    A payout needing two approvals leaves FROZEN only when two rows by different reviewers say APPROVE; one
    REJECT rejects it. The CLI (a shell on the server, docs/api.md, "Operations CLI") decides alone and leaves a row
    without a reviewer, labelled with the operator."""

    class Decision(models.TextChoices):
        APPROVE = "APPROVE", "Approve"
        REJECT = "REJECT", "Reject"

    payout = models.ForeignKey(Payout, on_delete=models.PROTECT, related_name="approvals", db_index=False)
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                 related_name="payout_approvals")
    actor_label = models.CharField(max_length=128)
    decision = models.CharField(max_length=8, choices=Decision.choices)
    reason = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["payout", "reviewer"], name="payout_approval_one_per_reviewer"),
            models.CheckConstraint(condition=~Q(reason=""), name="payout_approval_reason_required"),
        ]

    def __str__(self) -> str:
        return f"{self.payout_id} {self.decision} by {self.actor_label}"


class PayoutReviewQueue(Payout):
    """The admin's review queue: FROZEN payouts, oldest first (a proxy, so it has its own admin page)."""

    class Meta:
        proxy = True
        verbose_name = "payout in review"
        verbose_name_plural = "Payout review queue"


@tracked()
class DenyListedAccount(models.Model):
    """A payee account that sends every payout to it into review (docs/api.md, "Payout orders"), per currency or
    global."""

    payee_account = models.CharField(max_length=64)
    currency = models.ForeignKey(Currency, null=True, blank=True, on_delete=models.PROTECT,
                                 help_text="Empty: the account is deny-listed in every currency.")
    reason = models.CharField(max_length=255)
    is_active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                   editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "deny-listed payee account"
        constraints = [
            models.UniqueConstraint(fields=["payee_account", "currency"], name="deny_list_unique_per_currency"),
            models.UniqueConstraint(fields=["payee_account"], condition=Q(currency__isnull=True),
                                    name="deny_list_unique_global"),
        ]

    def __str__(self) -> str:
        return f"{mask_account(self.payee_account)} ({self.currency_id or 'all currencies'})"

    @property
    def masked_payee_account(self) -> str:
        return mask_account(self.payee_account)
