"""Admin building blocks: read-only admins for append-only records, and a page for a one-form admin action."""

from django.contrib import admin
from django.template.response import TemplateResponse

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
