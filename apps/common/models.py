import pghistory
import pgtrigger
from django.conf import settings
from django.db import models


def mark_saved(instance: models.Model, alias: str) -> models.Model:
    """`instance` as a row that a named query or a database function wrote: saved (not new) in database `alias`, as
    `save()` would leave it."""
    instance._state.adding = False
    instance._state.db = alias
    return instance


class AuditLog(models.Model):
    """Who did what to which object, with old and new values, written in the same transaction as the change."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)
    actor_label = models.CharField(max_length=128, help_text="Who acted: a username, 'cli' or 'system'.")
    action = models.CharField(max_length=64)
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=64)
    old = models.JSONField(default=dict, blank=True)
    new = models.JSONField(default=dict, blank=True)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        # Only what a query uses (the admin's action filter, an object's trail, the newest first): every signed
        # write that audits writes each index (docs/ledger.md, Indexes on the hot write tables).
        indexes = [models.Index(fields=["object_type", "object_id"]),
                   models.Index(fields=["action"], name="audit_action_idx")]
        # Append-only by the database's own rule: a trigger refuses UPDATE and DELETE of an audit row, from any
        # session, the application's or a console's (docs/staff-access.md).
        triggers = [pgtrigger.Protect(name="auditlog_append_only", operation=pgtrigger.Update | pgtrigger.Delete)]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_label} {self.action} {self.object_type}:{self.object_id}"


class Heartbeat(models.Model):
    """Last run of a periodic job, for the health check and on-call ('is the sweeper alive?')."""

    name = models.CharField(max_length=64, unique=True)
    beat_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} @ {self.beat_at:%Y-%m-%d %H:%M:%S}"


class ReferenceGeneration(models.Model):
    """One row: bumped by a PostgreSQL statement trigger on every write to a reference table, in the writer's
    transaction, so a process knows when its cached reference data is stale (apps.common.refcache)."""

    value = models.BigIntegerField()

    def __str__(self) -> str:
        return f"reference generation {self.value}"


class StaffRequest(models.Model):
    """A money or key change, or a change of a money setting, asked for by one staff member in the admin that takes
    effect only when a second person with the right role approves it (four eyes, docs/back-office.md). On approval the owning app's service
    runs in the approval's transaction; the audit trail names both people."""

    class Kind(models.TextChoices):
        PAYOUT_REVERSAL = "payout_reversal", "Payout reversal"
        BALANCE_ADJUSTMENT = "balance_adjustment", "Balance adjustment"
        MERCHANT_KEY = "merchant_key", "Merchant key upload"
        # Money settings changed in the admin (apps.common.setting_changes).
        CHANNEL_SETTING = "channel_setting", "Channel change"
        BANK_CODE_SETTING = "bank_code_setting", "Bank code change"
        CURRENCY_SETTING = "currency_setting", "Currency change"
        PRODUCT_SETTING = "product_setting", "Product change (fees, limits)"
        MERCHANT_SETTING = "merchant_setting", "Merchant change (callbacks, currencies, products)"
        DENY_LIST_SETTING = "deny_list_setting", "Deny-list change"
        # A merchant user who lost their authenticator or password (apps.portal.staff_requests).
        ACCESS_RECOVERY = "access_recovery", "Merchant user access recovery"

    class Status(models.TextChoices):
        PENDING = "PENDING", "Pending approval"
        APPROVED = "APPROVED", "Approved (applied)"
        REJECTED = "REJECTED", "Rejected"

    kind = models.CharField(max_length=32, choices=Kind.choices)
    payload = models.JSONField(help_text="The service's arguments, as asked for.")
    # Whole, never cut: which fields of what, credentials first (the kind's describe). The values, old and new, are
    # read live on the request's pages (StaffRequestKind.changes) and recorded in `result` and the audit trail.
    summary = models.TextField(help_text="What it changes, in words: every field, credentials first.")
    reason = models.TextField(help_text="Why the requester asks for it.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                     related_name="staff_requests")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="decided_staff_requests")
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)
    result = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "created_at"], name="staff_request_status_idx")]
        constraints = [
            models.CheckConstraint(condition=models.Q(decided_by__isnull=True) | ~models.Q(decided_by=models.F("requested_by")),
                                   name="staff_request_not_self_decided"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.get_kind_display()}: {self.summary}"


# --- Staff accounts and roles in the settings trail (apps.common.history, docs/staff-access.md) ---------------------
# Who holds which role (a group, a direct permission, superuser or staff status) and who may sign in at all is a
# money setting like any other: granting yourself a role is the first thing an attacker does. django.contrib.auth's
# models are not ours, so the trail tracks proxies of them defined here (pgtrigger's and pghistory's way for a
# third-party model: the triggers and event tables are then in apps.common's migrations, not in Django's).

from django.contrib.auth.models import Group, User  # noqa: E402

from apps.common.history import tracked_elsewhere  # noqa: E402


class StaffUser(User):
    class Meta:
        proxy = True
        app_label = "common"


class StaffUserGroup(User.groups.through):
    class Meta:
        proxy = True
        app_label = "common"


class StaffUserPermission(User.user_permissions.through):
    class Meta:
        proxy = True
        app_label = "common"


class GroupPermission(Group.permissions.through):
    class Meta:
        proxy = True
        app_label = "common"


# Never `password` (its hash), nor `last_login` (it changes at every sign-in: noise); named one by one, so a field a
# later Django adds stays out of the trail until someone adds it here. An update event is written only when one of
# these changes.
STAFF_USER_FIELDS = ["username", "email", "first_name", "last_name", "is_active", "is_staff", "is_superuser"]

# A new password (set by its owner or reset by someone else) is an event of its own, "password_set", that keeps the
# same fields as the others: that it changed and who changed it, never what it is.
UserEvent = tracked_elsewhere(StaffUser, pghistory.InsertEvent(), pghistory.UpdateEvent(), pghistory.DeleteEvent(),
                              pghistory.UpdateEvent("password_set", condition=pghistory.AnyChange("password")),
                              model_name="UserEvent", fields=STAFF_USER_FIELDS, verbose_name="staff user",
                              obj_field=pghistory.ObjForeignKey(related_name="events"))

# Memberships and grants: a row inserted is a grant, a row deleted a revocation (there is nothing to update).
GRANTS = (pghistory.InsertEvent("grant"), pghistory.DeleteEvent("revoke"))
UserGroupEvent = tracked_elsewhere(StaffUserGroup, *GRANTS, model_name="UserGroupEvent", fields=["user", "group"],
                                   obj_field=None, verbose_name="staff role (group)")
UserPermissionEvent = tracked_elsewhere(StaffUserPermission, *GRANTS, model_name="UserPermissionEvent",
                                        fields=["user", "permission"], obj_field=None,
                                        verbose_name="staff direct permission")
GroupPermissionEvent = tracked_elsewhere(GroupPermission, *GRANTS, model_name="GroupPermissionEvent",
                                         fields=["group", "permission"], obj_field=None,
                                         verbose_name="role (group) permission")


# Second factors in the same trail: removing someone's authenticator, or adding one to their account, is taking their
# seat (docs/staff-access.md, "Independence"). django-otp's device models, like auth's, are tracked through proxies
# here; never a device's key nor its counters (`last_t`, throttling: they change at every sign-in), only whose device
# it is, its name and whether it is confirmed (an enrolment confirms the device it created).
from django_otp.plugins.otp_static.models import StaticDevice  # noqa: E402
from django_otp.plugins.otp_totp.models import TOTPDevice  # noqa: E402


class StaffAuthenticator(TOTPDevice):
    class Meta:
        proxy = True
        app_label = "common"
        verbose_name = "authenticator"


class StaffRecoveryCodes(StaticDevice):
    class Meta:
        proxy = True
        app_label = "common"
        verbose_name = "recovery codes"


SECOND_FACTOR_FIELDS = ["user", "name", "confirmed"]
SECOND_FACTOR_EVENTS = (pghistory.InsertEvent(), pghistory.DeleteEvent(),
                        pghistory.UpdateEvent(condition=pghistory.AnyChange("user", "confirmed")))
AuthenticatorEvent = tracked_elsewhere(StaffAuthenticator, *SECOND_FACTOR_EVENTS, model_name="AuthenticatorEvent",
                                       fields=SECOND_FACTOR_FIELDS, verbose_name="authenticator (second factor)",
                                       obj_field=pghistory.ObjForeignKey(related_name="events"))
RecoveryCodesEvent = tracked_elsewhere(StaffRecoveryCodes, *SECOND_FACTOR_EVENTS, model_name="RecoveryCodesEvent",
                                       fields=SECOND_FACTOR_FIELDS, verbose_name="recovery codes (second factor)",
                                       obj_field=pghistory.ObjForeignKey(related_name="events"))


class AccountAct(models.Model):
    """One person's act on another person's account that the settings trail does not already hold: an invite they
    made and the invitee accepted, a portal role they granted, an access recovery they asked for or approved. The
    independence rule (apps.common.independence) reads these beside the trail of users, roles and second factors.
    Acts made from a shell on the server (the highest authority) name no person and are never recorded."""

    class Act(models.TextChoices):
        CREATED = "created", "created the account"
        INVITED = "invited", "invited"
        ROLE_GRANTED = "role_granted", "granted a role to"
        PASSWORD_SET = "password_set", "set the password of"
        SECOND_FACTOR_ADDED = "second_factor_added", "added a second factor to"
        SECOND_FACTOR_REMOVED = "second_factor_removed", "removed the second factor of"
        ACCESS_RESET = "access_reset", "reset the access of"

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    subject = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    act = models.CharField(max_length=32, choices=Act.choices)
    at = models.DateTimeField(auto_now_add=True)
    note = models.CharField(max_length=255, blank=True)

    class Meta:
        indexes = [models.Index(fields=["subject"], name="account_act_subject_idx")]
        constraints = [models.CheckConstraint(condition=~models.Q(actor=models.F("subject")),
                                              name="account_act_not_on_self")]

    def __str__(self) -> str:
        return f"{self.actor_id} {self.get_act_display()} {self.subject_id}"
