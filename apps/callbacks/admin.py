"""Admin of the callback outbox: events with their attempts (read-only) and the "Re-send" action.

Everything here is read-only; the only write is the re-send action, which needs the change permission and
calls callback_resend (its own durable transaction, audited). Bodies shown are exactly what was POSTed:
they carry the signature, never key material.
"""

import json

from django.contrib import admin, messages
from django.utils.html import format_html
from django.utils.translation import ngettext

from apps.callbacks.models import ATTEMPT_CLOCK_MARGIN, CallbackAttempt, CallbackEvent
from apps.callbacks.resend import RESENDABLE, callback_resend
from apps.common.admin import LagTolerantChangelistMixin, cut_cell, order_no_cell
from apps.common.formatting import utc_short


def _pretty(value) -> str:
    return format_html("<pre style='white-space: pre-wrap; margin: 0'>{}</pre>",
                       json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True))


class CallbackAttemptInline(admin.TabularInline):
    model = CallbackAttempt
    fields = ["number", "manual", "started_at", "duration_ms", "url", "key_version", "http_status", "success",
              "response_excerpt", "error"]
    readonly_fields = fields
    extra = 0
    show_change_link = True  # the attempt page shows the exact body sent
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(CallbackEvent)
class CallbackEventAdmin(LagTolerantChangelistMixin, admin.ModelAdmin):
    # Fits 1280 px with the filter column: status early, the order number shortened and the last error
    # cut (each whole in its tooltip and on the event's page, with every attempt).
    list_display = ["id", "status_text", "order_short", "type", "merchant_no", "attempts", "last_error_short",
                    "created_utc"]
    # No merchant filter: a list of every merchant in the filter column; search by merchant number instead.
    list_filter = ["status", "type"]
    search_fields = ["platform_order_no", "=merchant__merchant_no"]
    list_select_related = ["merchant"]
    date_hierarchy = "created_at"
    actions = ["resend"]
    inlines = [CallbackAttemptInline]
    # The merchant as text: staff who may see callbacks need not see merchant pages (a link would answer 403).
    fields = ["merchant_text", "type", "platform_order_no", "status", "url", "attempts_count", "next_attempt_at",
              "locked_until", "delivered_at", "last_error", "created_at", "business_payload", "last_body_sent"]
    readonly_fields = fields

    @admin.display(description="merchant")
    def merchant_text(self, obj: CallbackEvent) -> str:
        return str(obj.merchant)

    @admin.display(description="last error")
    def last_error_short(self, obj: CallbackEvent) -> str:
        return cut_cell(obj.last_error, em=10)

    @admin.display(description="order", ordering="platform_order_no")
    def order_short(self, obj: CallbackEvent) -> str:
        return order_no_cell(obj.platform_order_no)

    @admin.display(description="merchant", ordering="merchant__merchant_no")
    def merchant_no(self, obj: CallbackEvent) -> str:
        return format_html("<span title='{}'>{}</span>", obj.merchant.name, obj.merchant.merchant_no)

    @admin.display(description="status", ordering="status")
    def status_text(self, obj: CallbackEvent) -> str:
        """A pending event's next attempt is in its status's tooltip (one column fewer at 1280 px) and on its page."""
        if obj.status == CallbackEvent.Status.PENDING and obj.next_attempt_at:
            return format_html("<span title='next attempt {}'>{}</span>", utc_short(obj.next_attempt_at),
                               obj.get_status_display())
        return obj.get_status_display()

    @admin.display(description="created (UTC)", ordering="created_at")
    def created_utc(self, obj: CallbackEvent) -> str:
        return utc_short(obj.created_at)

    @admin.display(description="attempts", ordering="attempts_count")
    def attempts(self, obj: CallbackEvent) -> int:
        return obj.attempts_count

    @admin.display(description="business fields (identical in every attempt)")
    def business_payload(self, obj: CallbackEvent) -> str:
        return _pretty(obj.payload)

    @admin.display(description="body sent in the last attempt")
    def last_body_sent(self, obj: CallbackEvent) -> str:
        attempt = obj.attempts.filter(started_at__gte=obj.created_at - ATTEMPT_CLOCK_MARGIN).order_by("-number").first()
        return _pretty(attempt.request_body) if attempt else "-"

    def has_add_permission(self, request):
        return False  # events are written by the order services only

    def has_delete_permission(self, request, obj=None):
        return False  # the outbox is the delivery history

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        # Every field is read-only: the page is a view, and says so ("View callback event", not "Change ...").
        extra_context = {**(extra_context or {}), "show_save": False, "show_save_and_continue": False,
                         "show_save_and_add_another": False, "title": f"View {self.model._meta.verbose_name}"}
        return super().changeform_view(request, object_id, form_url, extra_context)

    @admin.action(description="Re-send selected dead or delivered callbacks (one extra attempt)",
                  permissions=["change"])
    def resend(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        events = callback_resend(event_ids=ids, actor=request.user)
        skipped = len(ids) - len(events)
        if events:
            self.message_user(request, ngettext("%(n)d callback queued for one more attempt.",
                                                "%(n)d callbacks queued for one more attempt.", len(events))
                              % {"n": len(events)}, messages.SUCCESS)
        if skipped:
            allowed = " or ".join(str(status.label).lower() for status in RESENDABLE)
            self.message_user(request, ngettext("%(n)d callback skipped", "%(n)d callbacks skipped", skipped)
                              % {"n": skipped} + f": only {allowed} events can be re-sent (pending ones are already "
                                                 "being retried).", messages.WARNING)


@admin.register(CallbackAttempt)
class CallbackAttemptAdmin(LagTolerantChangelistMixin, admin.ModelAdmin):
    list_display = ["id", "event_short", "number", "success", "http_status", "manual", "started_utc",
                    "key_version", "duration_ms"]
    list_filter = ["success", "manual"]
    search_fields = ["event__platform_order_no"]
    list_select_related = ["event"]
    fields = ["event", "number", "manual", "started_at", "finished_at", "duration_ms", "url", "key_version",
              "http_status", "success", "response_excerpt", "error", "body_sent"]
    readonly_fields = fields

    @admin.display(description="event", ordering="event_id")
    def event_short(self, obj: CallbackAttempt) -> str:
        return format_html("{} {}", obj.event_id, order_no_cell(obj.event.platform_order_no))

    @admin.display(description="started (UTC)", ordering="started_at")
    def started_utc(self, obj: CallbackAttempt) -> str:
        return utc_short(obj.started_at)

    @admin.display(description="body sent (JSON, as POSTed)")
    def body_sent(self, obj: CallbackAttempt) -> str:
        return _pretty(obj.request_body)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
