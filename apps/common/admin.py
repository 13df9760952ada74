"""Admin building blocks: read-only admins for append-only records, and a page for a one-form admin action."""

from datetime import timezone as dt_timezone

from django.contrib import admin
from django.template.response import TemplateResponse
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe
from django_otp.plugins.otp_static.models import StaticDevice
from django_otp.plugins.otp_totp.models import TOTPDevice
from pghistory.core import event_models as pghistory_event_models

from apps.common.history import TRACKED_MODELS, event_changes, event_who
from apps.common.models import AuditLog


class ReadOnlyAdminMixin:
    """Append-only records (ledger, audit): viewable with the view permission, never added, changed or deleted."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def render_action_form(model_admin, request, *, form, title: str, submit_label: str, intro: str = ""):
    """An admin page with one form whose POST calls a service (outside the admin's own transaction)."""
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": title,
        "form": form,
        "intro": intro,
        "submit_label": submit_label,
    }
    return TemplateResponse(request, "admin/action_form.html", context)


@admin.register(AuditLog)
class AuditLogAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "actor_label", "action", "object_type", "object_id"]
    list_filter = ["action", "object_type"]
    search_fields = ["object_id", "actor_label", "action"]
    date_hierarchy = "created_at"


class SettingsHistoryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The settings audit trail of one tracked model (apps.common.history): every insert, update and delete with who,
    when, and the old and new value of each field that changed. Read-only; the table itself is append-only."""

    list_display = ["pgh_created_at_display", "changed_object", "change_kind", "who", "changes"]
    list_filter = ["pgh_label"]
    list_select_related = ["pgh_context"]
    list_per_page = 50
    ordering = ["-pgh_id"]
    show_full_result_count = False

    def lookup_allowed(self, lookup, value, request=None):
        return lookup in ("pgh_obj", "pgh_obj__exact") or super().lookup_allowed(lookup, value, request)

    @admin.display(description="when (UTC)", ordering="pgh_id")
    def pgh_created_at_display(self, event):
        return f"{event.pgh_created_at.astimezone(dt_timezone.utc):%Y-%m-%d %H:%M:%S} UTC"

    @admin.display(description="change", ordering="pgh_label")
    def change_kind(self, event):
        return {"insert": "created", "update": "changed", "delete": "deleted"}.get(event.pgh_label, event.pgh_label)

    @admin.display(description="object")
    def changed_object(self, event):
        return f"{self.model.pgh_tracked_model._meta.verbose_name} #{event.pgh_obj_id}"

    @admin.display(description="who")
    def who(self, event):
        return event_who(event)

    @admin.display(description="changes (old \u2192 new)")
    def changes(self, event):
        rows = [(name, _shown(name, old), _shown(name, new)) for name, (old, new) in event_changes(event).items()]
        return format_html_join(mark_safe("<br>"), "<b>{}</b>: {} \u2192 {}", rows) or "\u2014"

    def get_fields(self, request, obj=None):
        return ["pgh_created_at_display", "change_kind", "changed_object", "who", "changes"]

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)


MASKED_FIELDS = {"payee_account"}  # shown as on every other admin page: the last four digits


def _shown(name: str, value) -> str:
    if value is None:
        return "\u2014"
    text = str(value)
    if name in MASKED_FIELDS:
        return "\u2022\u2022\u2022\u2022" + text[-4:]
    return text if len(text) <= 60 else f"{text[:40]}\u2026 ({len(text)} characters)"


def register_settings_history() -> None:
    for tracked_model in TRACKED_MODELS:
        [event_model] = pghistory_event_models(tracks_model=tracked_model)
        if not admin.site.is_registered(event_model):
            admin.site.register(event_model, SettingsHistoryAdmin)


register_settings_history()


class StaffSecondFactorAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Staff members' second factors (apps.common.staff_signin): who has one, since when it was last used. Never the
    secret (django-otp's own admin shows a device's QR code to any superuser). A lost phone: delete the member's
    authenticator (delete permission); they enrol a new one at their next sign-in, with their password."""

    list_display = ["user", "name", "confirmed", "last_used_at"]
    list_filter = ["confirmed"]
    search_fields = ["user__username"]
    fields = ["user", "name", "confirmed", "created_at", "last_used_at"]
    readonly_fields = fields
    list_select_related = ["user"]

    def has_delete_permission(self, request, obj=None):
        return admin.ModelAdmin.has_delete_permission(self, request, obj)


admin.site.register(TOTPDevice, StaffSecondFactorAdmin)
admin.site.register(StaticDevice, StaffSecondFactorAdmin)
