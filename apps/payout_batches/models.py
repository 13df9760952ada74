"""Payouts by hand in the merchant portal (docs/portal.md, "Payouts by hand"): one payout or a CSV file, asked for
by a merchant's finance user (the maker) and created only when an owner independent of the maker approves it (the
checker). Each row becomes a payout through `payout_create`, exactly as an API call would, with its own
`mch_order_no`."""

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from apps.merchants.models import Merchant
from apps.payout.models import Payout, mask_account

LIVE = ("PENDING", "APPROVED", "DONE")  # a batch that holds its file and its rows' mch_order_no


class PayoutBatch(models.Model):
    class Source(models.TextChoices):
        FORM = "form", "One payout"
        CSV = "csv", "CSV file"

    class Status(models.TextChoices):
        PENDING = "PENDING", "Waiting for the owner"
        APPROVED = "APPROVED", "Approved: creating payouts"
        DONE = "DONE", "Done"
        REJECTED = "REJECTED", "Rejected"

    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="payout_batches", db_index=False)
    source = models.CharField(max_length=8, choices=Source.choices)
    file_name = models.CharField(max_length=255, blank=True)
    file_sha256 = models.CharField(max_length=64, blank=True, help_text="SHA-256 of the uploaded file's bytes.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    row_count = models.PositiveIntegerField()
    note = models.CharField(max_length=255, blank=True, help_text="The maker's words for the owner.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)
    # Set when a processor starts or finishes a row; the sweep resumes an APPROVED batch idle for a while.
    progress_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["merchant", "status", "created_at"], name="payout_batch_by_merchant")]
        constraints = [
            # The same file uploaded twice is the same batch (unless the first was rejected).
            models.UniqueConstraint(fields=["merchant", "file_sha256"], condition=Q(status__in=LIVE) & ~Q(file_sha256=""),
                                    name="payout_batch_file_once"),
            # The merchant's maker-checker: whoever asked for a batch never approves it.
            models.CheckConstraint(condition=Q(status__in=["PENDING", "REJECTED"]) | ~Q(decided_by=F("created_by")),
                                   name="payout_batch_checker_is_not_maker"),
        ]

    def __str__(self) -> str:
        return f"batch #{self.pk} of {self.merchant.merchant_no}"


class PayoutBatchRow(models.Model):
    class Status(models.TextChoices):
        PENDING = "PENDING", "Waiting"
        CREATED = "CREATED", "Payout created"
        FAILED = "FAILED", "Not created"

    batch = models.ForeignKey(PayoutBatch, on_delete=models.PROTECT, related_name="rows")
    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="+", db_index=False)
    line = models.PositiveIntegerField(help_text="The row's line in the file (1 for a single payout).")
    mch_order_no = models.CharField(max_length=64)
    product_code = models.CharField(max_length=64)
    amount = models.BigIntegerField()
    currency = models.CharField(max_length=16)
    payee_name = models.CharField(max_length=128)
    payee_account = models.CharField(max_length=64)
    bank_code = models.CharField(max_length=32)
    attach = models.CharField(max_length=512, blank=True)
    # Holds the mch_order_no for this batch while it is live; a rejected batch lets go of it.
    claimed = models.BooleanField(default=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    payout = models.ForeignKey(Payout, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    replayed = models.BooleanField(default=False, help_text="The payout existed already (same mch_order_no and "
                                                            "parameters): nothing was created again.")
    error_code = models.CharField(max_length=8, blank=True)
    error_msg = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["batch", "line"]
        constraints = [
            models.UniqueConstraint(fields=["batch", "line"], name="payout_batch_row_line_unique"),
            # One live batch row per mch_order_no of a merchant: two files cannot both ask for the same order.
            models.UniqueConstraint(fields=["merchant", "mch_order_no"], condition=Q(claimed=True),
                                    name="payout_batch_row_claims_order_no"),
        ]

    def __str__(self) -> str:
        return f"row {self.line} of batch #{self.batch_id}"

    @property
    def masked_payee_account(self) -> str:
        return mask_account(self.payee_account)
