"""Double-entry ledger: accounts with cached balances, immutable postings made of entries that sum to zero."""

from django.db import models
from django.db.models import Q

from apps.currencies.models import Currency
from apps.merchants.models import Merchant


class AccountKind(models.TextChoices):
    # A merchant's three balances (docs/api.md, "Endpoints"; frozen is hidden from the API).
    AVAILABLE = "available", "Available"
    SETTLING = "settling", "Settling"
    FROZEN = "frozen", "Frozen"
    # Platform accounts: the other side of every merchant movement, so each posting sums to zero.
    PAYIN_CLEARING = "payin_clearing", "Pay-in clearing"
    PAYOUT_CLEARING = "payout_clearing", "Payout clearing"
    FEE_REVENUE = "fee_revenue", "Fee revenue"
    ADJUSTMENTS = "adjustments", "Adjustments"


MERCHANT_KINDS = (AccountKind.AVAILABLE, AccountKind.SETTLING, AccountKind.FROZEN)
PLATFORM_KINDS = (AccountKind.PAYIN_CLEARING, AccountKind.PAYOUT_CLEARING, AccountKind.FEE_REVENUE,
                  AccountKind.ADJUSTMENTS)


class LedgerAccount(models.Model):
    # No index of their own (docs/ledger.md, Indexes): the unique constraints below start with them.
    merchant = models.ForeignKey(Merchant, null=True, blank=True, on_delete=models.PROTECT, related_name="accounts",
                                 db_index=False)
    currency = models.ForeignKey(Currency, on_delete=models.PROTECT, db_index=False)
    kind = models.CharField(max_length=32, choices=AccountKind.choices)
    # Merchant accounts: the cached sum of the account's entries, moved under the row's lock in the transaction that
    # inserts them. Platform accounts carry none (always 0): they are the other side of every merchant's movements,
    # and a cached balance would make every posting of a currency queue on one row. Their balance is the sum of
    # their entries (apps.ledger.selectors.account_balance).
    balance = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["merchant", "currency", "kind"], condition=Q(merchant__isnull=False),
                                    name="ledger_merchant_account_unique"),
            models.UniqueConstraint(fields=["currency", "kind"], condition=Q(merchant__isnull=True),
                                    name="ledger_platform_account_unique"),
            models.CheckConstraint(
                condition=(Q(merchant__isnull=False) & Q(kind__in=[k.value for k in MERCHANT_KINDS]))
                | (Q(merchant__isnull=True) & Q(kind__in=[k.value for k in PLATFORM_KINDS])),
                name="ledger_account_kind_matches_owner",
            ),
            # A merchant balance never goes below zero, whatever code path tries.
            models.CheckConstraint(condition=Q(merchant__isnull=True) | Q(balance__gte=0),
                                   name="ledger_merchant_balance_non_negative"),
            models.CheckConstraint(condition=Q(merchant__isnull=False) | Q(balance=0),
                                   name="ledger_platform_balance_not_cached"),
        ]

    def __str__(self) -> str:
        owner = self.merchant.merchant_no if self.merchant_id else "platform"
        return f"{owner}:{self.currency_id}:{self.kind}"


class Posting(models.Model):
    """One balanced movement. `kind` + `cause` name why it happened and make a replay impossible."""

    kind = models.CharField(max_length=64)
    cause = models.CharField(max_length=128, help_text="What caused it: an order number, an adjustment reference.")
    merchant = models.ForeignKey(Merchant, null=True, blank=True, on_delete=models.PROTECT, related_name="postings")
    currency = models.ForeignKey(Currency, on_delete=models.PROTECT, db_index=False)
    memo = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["kind", "cause"], name="ledger_posting_unique_cause")]
        # A balance adjustment is a posting made by hand, asked by one person and approved by another
        # (apps.ledger.staff_requests).
        permissions = [("adjust_balance", "Can ask for and approve merchant balance adjustments")]

    def __str__(self) -> str:
        return f"{self.kind}:{self.cause}"


class Entry(models.Model):
    posting = models.ForeignKey(Posting, on_delete=models.PROTECT, related_name="entries")
    account = models.ForeignKey(LedgerAccount, on_delete=models.PROTECT, related_name="entries")
    currency = models.ForeignKey(Currency, on_delete=models.PROTECT, db_index=False)
    amount = models.BigIntegerField(help_text="Signed, minor units: positive raises the account's balance.")

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "entries"
        constraints = [models.CheckConstraint(condition=~Q(amount=0), name="ledger_entry_non_zero")]

    def __str__(self) -> str:
        return f"{self.account} {self.amount:+d}"


class Hold(models.Model):
    """Two-phase funds: placed (available → frozen), then resolved exactly once, released or settled."""

    class Status(models.TextChoices):
        HELD = "held", "Held"
        RELEASED = "released", "Released"
        SETTLED = "settled", "Settled"

    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="holds")
    currency = models.ForeignKey(Currency, on_delete=models.PROTECT, db_index=False)
    amount = models.BigIntegerField()
    cause = models.CharField(max_length=128)  # unique: ledger_hold_unique_cause
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.HELD)
    placed_by = models.OneToOneField(Posting, on_delete=models.PROTECT, related_name="placed_hold")
    resolved_by = models.OneToOneField(Posting, null=True, blank=True, on_delete=models.PROTECT,
                                       related_name="resolved_hold")
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["cause"], name="ledger_hold_unique_cause"),
            models.CheckConstraint(condition=Q(amount__gt=0), name="ledger_hold_amount_positive"),
            models.CheckConstraint(
                condition=(Q(status="held") & Q(resolved_by__isnull=True) & Q(resolved_at__isnull=True))
                | (~Q(status="held") & Q(resolved_by__isnull=False) & Q(resolved_at__isnull=False)),
                name="ledger_hold_resolved_once",
            ),
        ]
        # Open holds only: the stranded-payout check "finished with its funds still frozen" (apps/payout/sweep.py)
        # reads these few rows, not every hold ever placed.
        indexes = [models.Index(fields=["id"], condition=Q(status="held"), name="ledger_hold_open")]

    def __str__(self) -> str:
        return f"hold {self.cause} {self.amount} {self.status}"


class NextHoldId(models.Func):
    """The next id of the holds' sequence, drawn by the INSERT of the order the hold will be placed for (a payout's
    `hold_id` default): the order names its hold before the posting that places it (hold_place(hold_id=...), in the
    same transaction; the order's foreign key to the hold is checked at COMMIT), so the order's row is written once."""

    function = "nextval"
    output_field = models.BigIntegerField()

    def __init__(self):
        super().__init__(models.Value(f"{Hold._meta.db_table}_id_seq"))


class Statement(models.Model):
    """A merchant's signed statement of one closed day (in SETTLEMENT_TIME_ZONE) and currency, kept as served:
    the CSV (signed header + body), the SHA-256 of its body and the platform key version that signed it."""

    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="statements", db_index=False)
    currency = models.ForeignKey(Currency, on_delete=models.PROTECT, db_index=False)
    date = models.DateField()
    csv_text = models.TextField()
    digest = models.CharField(max_length=64)
    signature = models.TextField()
    key_version = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["merchant", "currency", "date"],
                                               name="ledger_statement_unique_day")]

    def __str__(self) -> str:
        return f"statement {self.merchant_id}:{self.currency_id}:{self.date}"
