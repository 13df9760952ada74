"""The admin's page of merchant users (read only): who belongs to which merchant, and the one staff action on them,
asking for an access recovery (a staff request a second person approves, docs/staff-access.md)."""

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import Exists, OuterRef
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.common.admin import ReadOnlyAdminMixin, StaffReasonForm
from apps.common.models import StaffRequest
from apps.common.staff_requests import StaffRequestRefused, staff_request_create
from apps.common.admin import order_no_cell
from apps.common.formatting import utc_short
from apps.common.stranded import stranded_list_filter
from apps.currencies.formatting import money
from apps.currencies.selectors import currency_get
from apps.portal.models import MerchantUser, RefundRequest
from apps.portal.refunds import REFUND_REQUEST_STRANDED
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


@admin.register(RefundRequest)
class RefundRequestAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Refunds merchants asked for in their portal (docs/portal.md, "Refunds"), read only: who asked, who decided,
    and the refund it made. Decided only by the merchant's own people."""

    list_display = ("pk", "amount_display", "status", "merchant_no", "order_short", "refund_no", "created_utc")
    list_filter = ("status", ("created_at", admin.DateFieldListFilter), stranded_list_filter(REFUND_REQUEST_STRANDED))
    search_fields = ("=mch_refund_no", "=refund__refund_no", "=order__platform_order_no", "=order__mch_order_no",
                     "=merchant__merchant_no")
    list_select_related = ("merchant", "order", "refund")
    ordering = ("-id",)
    fields = ("merchant", "order", "mch_refund_no", "currency", "amount", "reason", "status", "created_by",
              "created_at", "decided_by", "decided_at", "decision_reason", "refund", "error_code", "error_msg",
              "finished_at")
    readonly_fields = fields

    @admin.display(description="amount", ordering="amount")
    def amount_display(self, obj: RefundRequest) -> str:
        return money(obj.amount, currency_get(obj.currency))

    @admin.display(description="merchant", ordering="merchant__merchant_no")
    def merchant_no(self, obj: RefundRequest) -> str:
        return obj.merchant.merchant_no

    @admin.display(description="pay-in", ordering="order__platform_order_no")
    def order_short(self, obj: RefundRequest) -> str:
        return order_no_cell(obj.order.platform_order_no)

    @admin.display(description="refund")
    def refund_no(self, obj: RefundRequest) -> str:
        return order_no_cell(obj.refund.refund_no) if obj.refund_id else "-"

    @admin.display(description="created (UTC)", ordering="created_at")
    def created_utc(self, obj: RefundRequest) -> str:
        return utc_short(obj.created_at)
