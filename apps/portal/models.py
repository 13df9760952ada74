"""Merchant users (docs/portal.md): a Django user, never staff, linked to one merchant with one role."""

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from apps.merchants.models import Merchant


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    FINANCE = "finance", "Finance"
    DEVELOPER = "developer", "Developer"
    VIEWER = "viewer", "Viewer"


class MerchantUser(models.Model):
    """A person of a merchant. The Django user behind it is never staff (the admin refuses it) and belongs to this
    one merchant only; every portal query is scoped to `merchant` (apps.portal.access)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="merchant_user")
    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="portal_users")
    role = models.CharField(max_length=16, choices=Role.choices)
    is_active = models.BooleanField(default=True, help_text="Off: the person can no longer sign in to the portal.")
    created_at = models.DateTimeField(auto_now_add=True)
    # Making someone an active owner (a promotion, or switching an owner back on) waits for a second owner,
    # independent of whoever asked, as an owner invite does (docs/portal.md, "Maker-checker and independence").
    owner_requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                           related_name="+")
    owner_requested_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["merchant", "role"], name="portal_user_merchant_role_idx")]

    def __str__(self) -> str:
        return f"{self.user.get_username()} ({self.merchant.merchant_no}, {self.role})"


class Invite(models.Model):
    """A one-time link that makes a merchant user: only the SHA-256 of its token is stored; it expires and is used
    at most once (`used_at`, set under the row lock when the person sets their password)."""

    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="portal_invites")
    username = models.CharField(max_length=150, help_text="The sign-in name the person will use (their e-mail).")
    role = models.CharField(max_length=16, choices=Role.choices)
    token_hash = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="+")
    created_by_label = models.CharField(max_length=128, help_text="Who made the link: a user, or cli:<operator>.")
    # An owner invite made in the portal works only once a second owner, independent of its maker, approved it
    # (docs/portal.md, "Maker-checker and independence"); staff-made invites need no approval.
    needs_approval = models.BooleanField(default=False)
    approved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                    related_name="+")
    approved_at = models.DateTimeField(null=True, blank=True)
    used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    merchant_user = models.OneToOneField(MerchantUser, null=True, blank=True, on_delete=models.PROTECT,
                                         related_name="invite")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(used_at__isnull=True) | Q(merchant_user__isnull=False),
                                   name="portal_invite_used_makes_a_user"),
            models.CheckConstraint(condition=Q(needs_approval=False) | Q(used_at__isnull=True)
                                   | Q(approved_at__isnull=False), name="portal_invite_used_only_once_approved"),
            models.CheckConstraint(condition=Q(approved_by__isnull=True) | ~Q(approved_by=F("created_by")),
                                   name="portal_invite_approver_is_not_maker"),
        ]

    @property
    def waiting_for_approval(self) -> bool:
        return self.needs_approval and self.approved_at is None

    def __str__(self) -> str:
        return f"invite {self.username} ({self.merchant.merchant_no}, {self.role})"


class AccessRecovery(models.Model):
    """A merchant user's access recovered by two staff (docs/staff-access.md, "Recovering a merchant user's access"):
    made when the staff request is approved. The one-time link is e-mailed to the person; only the SHA-256 of its
    token is stored; it expires and is used at most once (`used_at`, set under the row lock). From `used_at` the
    person is in the cooling-off (apps.portal.recovery)."""

    merchant_user = models.ForeignKey(MerchantUser, on_delete=models.PROTECT, related_name="recoveries")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    approved_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    email = models.EmailField(help_text="Where the link was sent: the person's address on record.")
    token_hash = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True, help_text="A later recovery of the same person.")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["merchant_user", "used_at"], name="portal_recovery_user_used_idx")]
        permissions = [("recover_access", "Can ask for and approve a merchant user's access recovery")]

    def __str__(self) -> str:
        return f"recovery of {self.merchant_user_id} ({self.created_at:%Y-%m-%d %H:%M})"


class Notice(models.Model):
    """A message to one merchant user, shown on the portal's home page until they dismiss it: another owner's access
    was recovered, a key version waits to go live (docs/portal.md, "Notices")."""

    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="+")
    merchant_user = models.ForeignKey(MerchantUser, on_delete=models.PROTECT, related_name="notices")
    subject = models.CharField(max_length=200)
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    dismissed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["merchant_user", "dismissed_at"], name="portal_notice_open_idx")]

    def __str__(self) -> str:
        return f"notice to {self.merchant_user_id}: {self.subject}"


class KeyUpload(models.Model):
    """Who uploaded a key version in the portal, and who confirmed it: the version is live once a second, independent
    owner confirms it, or else from its `live_from` (docs/portal.md, "Key confirmation")."""

    key = models.OneToOneField("merchants.MerchantKey", on_delete=models.PROTECT, related_name="portal_upload")
    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="+")
    uploaded_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    confirmed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                     related_name="+")
    confirmed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"upload of key {self.key_id} by {self.uploaded_by_id}"


class RefundRequest(models.Model):
    """A refund of a paid pay-in asked for in the portal (docs/portal.md, "Refunds"): a finance user or an owner asks,
    an owner independent of them approves with a fresh code, and only then is the refund made, through
    `refund_create` as the API's refund/create would, with `mch_refund_no` fixed when the request is made (so a
    request approved or processed twice is one refund)."""

    class Status(models.TextChoices):
        PENDING = "PENDING", "Waiting for an owner"
        APPROVED = "APPROVED", "Approved: refund being made"
        DONE = "DONE", "Refund made"
        FAILED = "FAILED", "Refused: not refunded"
        REJECTED = "REJECTED", "Rejected"
        WITHDRAWN = "WITHDRAWN", "Withdrawn"

    DECIDED = (Status.APPROVED, Status.DONE, Status.FAILED)  # approved by a checker, whatever became of the refund

    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="refund_requests", db_index=False)
    order = models.ForeignKey("collection.CollectionOrder", on_delete=models.PROTECT, related_name="refund_requests")
    mch_refund_no = models.CharField(max_length=64, help_text="The refund's mch_refund_no, made with the request.")
    currency = models.CharField(max_length=16)
    amount = models.BigIntegerField(help_text="Minor units.")
    reason = models.CharField(max_length=256)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.CharField(max_length=500, blank=True)
    refund = models.OneToOneField("collection.Refund", null=True, blank=True, on_delete=models.PROTECT,
                                  related_name="portal_request")
    error_code = models.CharField(max_length=8, blank=True)
    error_msg = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["merchant", "status", "created_at"], name="refund_request_by_merchant"),
            # The resume sweep's scan: approved requests whose refund was not recorded yet.
            models.Index(fields=["decided_at"], condition=Q(status="APPROVED"), name="refund_request_approved_idx"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["merchant", "mch_refund_no"], name="refund_request_mch_refund_no_unique"),
            models.CheckConstraint(condition=Q(amount__gt=0), name="refund_request_amount_positive"),
            # The merchant's maker-checker: whoever asked for a refund never approves it.
            models.CheckConstraint(condition=~Q(status__in=["APPROVED", "DONE", "FAILED"])
                                   | (Q(decided_by__isnull=False) & ~Q(decided_by=F("created_by"))),
                                   name="refund_request_checker_is_not_maker"),
            models.CheckConstraint(condition=~Q(status="DONE") | Q(refund__isnull=False),
                                   name="refund_request_done_has_refund"),
        ]

    def __str__(self) -> str:
        return f"refund request #{self.pk} of {self.merchant.merchant_no}"
