"""Outbox of merchant callbacks (docs/api.md, "Callbacks"): one event per (platform_order_no, type), one row per
attempt."""

from datetime import timedelta

from django.db import models

from apps.merchants.models import Merchant


class CallbackEvent(models.Model):
    class Type(models.TextChoices):
        COLLECTION_SUCCESS = "collection.success", "Collection success"
        PAYOUT_TERMINAL = "payout.terminal", "Payout terminal"
        PAYOUT_REVERSED = "payout.reversed", "Payout reversed"
        REFUND_TERMINAL = "refund.terminal", "Refund terminal"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        DEAD = "dead", "Dead"

    # Indexed by callback_event_by_merchant (its first column).
    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="callback_events",
                                 db_index=False)
    type = models.CharField(max_length=32, choices=Type.choices)
    platform_order_no = models.CharField(max_length=64)
    url = models.CharField(max_length=512, blank=True)
    # Business fields only; signing fields are added fresh at every attempt.
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    attempts_count = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    # Lease of the worker making an attempt: no other worker claims the event while it is set. A worker lost
    # mid-delivery leaves it behind; when it has passed, the sweeper counts the attempt as failed and clears it.
    locked_until = models.DateTimeField(null=True, blank=True)
    # Last time a task was queued for the current due attempt; the sweeper re-queues only after a while. Unset
    # while the event waits for a task: a retry come due, or refused a slot by the merchant's bulkhead.
    dispatched_at = models.DateTimeField(null=True, blank=True)
    # Set by a manual re-send; the next attempt is a single extra one (a failure makes the event dead again).
    resend_requested = models.BooleanField(default=False)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            # The sweeper's scan: pending events by due time.
            models.Index(fields=["next_attempt_at"], condition=models.Q(status="pending"), name="callback_event_due"),
            # The bulkhead counts a merchant's leased events at every claim.
            models.Index(fields=["merchant", "locked_until"], name="callback_event_merchant_lease"),
            # A merchant's events by status and due time: the hand-off of a freed bulkhead slot reads the first
            # waiting one under (merchant, "pending"). Not partial: PostgreSQL costs a partial index without the
            # (merchant_id, status) statistics of migration 0002, so it would expect thousands of a healthy
            # merchant's events pending (its delivered history times the share of pending events) and walk
            # `callback_event_due` through another merchant's backlog hoping to meet one early. It also serves the
            # merchant's foreign key, which has no index of its own (docs/callbacks.md, "Indexes").
            models.Index(fields=["merchant", "status", "next_attempt_at", "id"], name="callback_event_by_merchant"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["platform_order_no", "type"], name="callback_event_unique_per_order_type")
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.platform_order_no} ({self.status})"


# The web and the workers stamp events and attempts by their own hosts' clocks: a bound on an attempt's start drawn
# from another row's time leaves this much room (it reads a second month only within it of a month's start).
ATTEMPT_CLOCK_MARGIN = timedelta(hours=1)


class CallbackAttempt(models.Model):
    """One POST (or one refused try) of an event: the exact body sent and what came back.

    Partitioned by month of `started_at` (apps/callbacks/partitions.py): the database's key is (id, started_at) and
    each statement that finds one attempt says its start (or bounds it), so it reads one month."""

    event = models.ForeignKey(CallbackEvent, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    manual = models.BooleanField(default=False, help_text="Made because of a manual re-send.")
    started_at = models.DateTimeField()
    # Null while the attempt is in flight, or when its worker was lost before recording the outcome.
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    url = models.CharField(max_length=512)
    key_version = models.PositiveIntegerField(null=True, blank=True)
    request_body = models.JSONField(default=dict)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_excerpt = models.TextField(blank=True)
    error = models.TextField(blank=True)
    success = models.BooleanField(default=False)

    class Meta:
        ordering = ["event", "number"]
        # A partitioned table's unique constraints hold its partition key. The number is unique per event all the
        # same: it is the event's attempts_count, incremented under the event's lease (apps/callbacks/deliver.py).
        constraints = [models.UniqueConstraint(fields=["event", "number", "started_at"],
                                               name="callback_attempt_unique_number")]

    def __str__(self) -> str:
        return f"event {self.event_id}, attempt {self.number}"
