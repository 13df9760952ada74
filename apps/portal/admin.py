"""The admin's page of merchant users (read only): who belongs to which merchant, and the one staff action on them,
asking for an access recovery (a staff request a second person approves, docs/staff-access.md)."""

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import Exists, OuterRef
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.common.admin import StaffReasonForm
from apps.common.models import StaffRequest
from apps.common.staff_requests import StaffRequestRefused, staff_request_create
from apps.portal.models import MerchantUser
from apps.portal.recovery import recovery_payload
from apps.portal.staff_requests import RECOVER_PERMISSION


@admin.register(MerchantUser)
class MerchantUserAdmin(admin.ModelAdmin):
    list_display = ["username", "merchant", "role", "is_active", "second_factor", "created_at"]
    list_select_related = ["user", "merchant"]
    search_fields = ["user__username", "merchant__merchant_no", "merchant__name"]
    fields = ["username", "merchant", "role", "is_active", "second_factor", "created_at"]
    readonly_fields = fields
    actions = ["ask_recovery"]

    @admin.display(description="sign-in name", ordering="user__username")
    def username(self, obj):
        return obj.user.get_username()

    def get_queryset(self, request):
        # One subquery for the whole page, not a query per row.
        return super().get_queryset(request).annotate(
            has_authenticator=Exists(TOTPDevice.objects.filter(user=OuterRef("user"), confirmed=True)))

    @admin.display(description="authenticator", boolean=True)
    def second_factor(self, obj):
        return obj.has_authenticator

    def has_view_permission(self, request, obj=None):
        return request.user.has_perm(RECOVER_PERMISSION) or super().has_view_permission(request, obj)

    def has_module_permission(self, request):
        return self.has_view_permission(request)

    def has_add_permission(self, request):
        return False  # people join a merchant through an invite (docs/portal.md)

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_recover_permission(self, request) -> bool:
        return request.user.has_perm(RECOVER_PERMISSION)

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    @admin.action(description="Ask to recover the access of the selected people (a second person approves)",
                  permissions=["recover"])
    def ask_recovery(self, request, queryset):
        people = list(queryset.select_related("user", "merchant"))
        form = StaffReasonForm(request.POST if "apply" in request.POST else None)
        if form.is_bound and form.is_valid():
            for person in people:
                try:
                    created = staff_request_create(
                        kind=StaffRequest.Kind.ACCESS_RECOVERY, requested_by=request.user,
                        reason=form.cleaned_data["reason"],
                        payload=recovery_payload(merchant_user=person, requested_by=request.user))
                except StaffRequestRefused as exc:
                    self.message_user(request, f"{person.user.get_username()}: refused: {exc}", messages.ERROR)
                else:
                    self.message_user(request, f"Recovery of {person.user.get_username()} requested (request "
                                               f"#{created.pk}): it takes effect when a second person approves it.",
                                      messages.SUCCESS)
            return redirect(reverse("admin:common_staffrequest_changelist"))
        context = {
            **self.admin_site.each_context(request), "opts": self.model._meta, "form": form,
            "title": "Ask to recover a merchant user's access", "submit_label": "Ask for recovery",
            "intro": "For a person who lost their authenticator or password. When a second person approves: their "
                     "second-factor devices are removed, their password made unusable, and a one-time link is "
                     "e-mailed to their address on record (never shown here). Their merchant's other owners are "
                     "told. Say how you verified that the person asked (who, through which channel).",
            "people": people, "action": "ask_recovery", "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/portal/merchantuser/recovery_form.html", context)
