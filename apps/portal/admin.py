"""Staff's view of merchant users and invites (read-only but for switching a person off and withdrawing an invite).
Invites are made with `manage.py portal_invite` (the link is printed once), or by the merchant's owner in the portal."""

from django.contrib import admin, messages
from django.db import transaction
from django.utils import timezone

from apps.common import audit
from apps.portal.models import Invite, MerchantUser


@admin.register(MerchantUser)
class MerchantUserAdmin(admin.ModelAdmin):
    list_display = ("user", "merchant", "role", "is_active", "created_at")
    list_filter = ("role", "is_active")
    search_fields = ("user__username", "merchant__merchant_no", "merchant__name")
    list_select_related = ("user", "merchant")
    readonly_fields = ("user", "merchant", "role", "is_active", "created_at")
    actions = ["switch_off"]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.action(description="Switch off portal access of the selected people", permissions=["change"])
    def switch_off(self, request, queryset):
        with transaction.atomic():
            for member in queryset.select_for_update().filter(is_active=True):
                member.is_active = False
                member.save(update_fields=["is_active"])
                audit.record(actor=request.user, action="portal.member_update", obj=member,
                             old={"is_active": True}, new={"is_active": False}, reason="switched off by staff")
        messages.success(request, "Switched off.")


@admin.register(Invite)
class InviteAdmin(admin.ModelAdmin):
    list_display = ("username", "merchant", "role", "created_by_label", "created_at", "expires_at", "used_at",
                    "revoked_at")
    list_filter = ("role",)
    search_fields = ("username", "merchant__merchant_no")
    exclude = ("token_hash",)
    readonly_fields = ("merchant", "username", "role", "expires_at", "created_at", "created_by", "created_by_label",
                       "used_at", "revoked_at", "merchant_user")
    actions = ["withdraw"]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.action(description="Withdraw the selected unused invites", permissions=["change"])
    def withdraw(self, request, queryset):
        with transaction.atomic():
            for invite in queryset.select_for_update().filter(used_at__isnull=True, revoked_at__isnull=True):
                invite.revoked_at = timezone.now()
                invite.save(update_fields=["revoked_at"])
                audit.record(actor=request.user, action="portal.invite_revoke", obj=invite,
                             new={"username": invite.username})
        messages.success(request, "Withdrawn.")
