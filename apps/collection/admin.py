from django.contrib import admin

from apps.collection.models import CollectionOrder, Refund
from apps.collection.sweep import REFUND_STRANDED, STRANDED
from django.urls import reverse
from django.utils.html import format_html

from apps.common.admin import LagTolerantChangelistMixin, ReadOnlyAdminMixin, order_no_cell
from apps.common.formatting import utc_short
from apps.common.stranded import stranded_list_filter
from apps.currencies.formatting import money


class RefundInline(admin.TabularInline):
    """The pay-in's refunds on its page, read-only (docs/api.md, "Refunds")."""

    model = Refund
    fk_name = "order"
    fields = ("refund_link", "mch_refund_no", "amount_display", "status", "fail_reason", "created_at", "finished_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False
    ordering = ("id",)

    @admin.display(description="refund")
    def refund_link(self, obj: Refund) -> str:
        return format_html('<a href="{}">{}</a>', reverse("admin:collection_refund_change", args=[obj.pk]),
                           obj.refund_no)

    @admin.display(description="amount")
    def amount_display(self, obj: Refund) -> str:
        return money(obj.amount, obj.currency)

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(CollectionOrder)
class CollectionOrderAdmin(LagTolerantChangelistMixin, admin.ModelAdmin):
    """Read-only view of pay-ins: money only moves through apps.collection.services."""

    # Fits 1280 px with the filter column: amount and status first after the order, long numbers and
    # names shortened with the whole value in the tooltip; fee, net, paid and settled times on the order's page.
    list_display = ("order_short", "amount_display", "status", "merchant_no", "mch_order_short", "settlement_short",
                    "created_utc")
    list_display_links = ("order_short",)
    # No merchant filter: a list of every merchant in the filter column; search by merchant number instead.
    list_filter = ("status", "currency", "settlement", ("created_at", admin.DateFieldListFilter),
                   ("paid_at", admin.DateFieldListFilter), stranded_list_filter(STRANDED))
    search_fields = ("=platform_order_no", "=mch_order_no", "=merchant__merchant_no")
    date_hierarchy = "created_at"
    list_select_related = ("merchant", "currency")
    ordering = ("-id",)
    fields = ("platform_order_no", "mch_order_no", "merchant", "status", "product", "settlement", "channel",
              "route_reason", "currency", "amount", "fee", "net_amount", "subject", "attach", "return_url",
              "expire_seconds", "expire_at", "paid_at", "settled_at", "upstream_reference", "created_at", "updated_at")
    readonly_fields = fields  # every field: state and money change only through the services
    inlines = [RefundInline]

    @admin.display(description="amount", ordering="amount")
    def amount_display(self, obj: CollectionOrder) -> str:
        return money(obj.amount, obj.currency)

    @admin.display(description="pay-in", ordering="id")
    def order_short(self, obj: CollectionOrder) -> str:
        return order_no_cell(obj.platform_order_no)

    @admin.display(description="merchant order", ordering="mch_order_no")
    def mch_order_short(self, obj: CollectionOrder) -> str:
        return order_no_cell(obj.mch_order_no, head=6)

    @admin.display(description="merchant", ordering="merchant__merchant_no")
    def merchant_no(self, obj: CollectionOrder) -> str:
        return format_html("<span title='{}'>{}</span>", obj.merchant.name, obj.merchant.merchant_no)

    @admin.display(description="created (UTC)", ordering="created_at")
    def created_utc(self, obj: CollectionOrder) -> str:
        return utc_short(obj.created_at)

    @admin.display(description="paid (UTC)", ordering="paid_at")
    def paid_utc(self, obj: CollectionOrder) -> str:
        return utc_short(obj.paid_at)

    @admin.display(description="settles", ordering="settlement")
    def settlement_short(self, obj: CollectionOrder) -> str:
        return format_html("<span title='{}'>{}</span>", obj.get_settlement_display(), obj.settlement)

    @admin.display(description="net (amount − fee)")
    def net_amount(self, obj: CollectionOrder) -> int:
        return obj.net_amount

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Refund)
class RefundAdmin(ReadOnlyAdminMixin, LagTolerantChangelistMixin, admin.ModelAdmin):
    """Read-only view of refunds: state and money change only through apps.collection.refunds."""

    list_display = ("refund_short", "amount_display", "status", "merchant_no", "order_short", "mch_refund_short",
                    "created_utc")
    list_display_links = ("refund_short",)
    list_filter = ("status", "currency", ("created_at", admin.DateFieldListFilter),
                   stranded_list_filter(REFUND_STRANDED))
    # Either refund number, the refunded pay-in's numbers, or the merchant's number.
    search_fields = ("=refund_no", "=mch_refund_no", "=order__platform_order_no", "=order__mch_order_no",
                     "=merchant__merchant_no")
    date_hierarchy = "created_at"
    list_select_related = ("merchant", "currency", "order")
    ordering = ("-id",)
    fields = ("refund_no", "mch_refund_no", "merchant", "order", "status", "channel", "currency", "amount", "reason",
              "fail_reason", "upstream_reference", "hold", "created_at", "finished_at", "updated_at")
    readonly_fields = fields

    @admin.display(description="amount", ordering="amount")
    def amount_display(self, obj: Refund) -> str:
        return money(obj.amount, obj.currency)

    @admin.display(description="refund", ordering="id")
    def refund_short(self, obj: Refund) -> str:
        return order_no_cell(obj.refund_no)

    @admin.display(description="pay-in", ordering="order__platform_order_no")
    def order_short(self, obj: Refund) -> str:
        return order_no_cell(obj.order.platform_order_no)

    @admin.display(description="merchant refund", ordering="mch_refund_no")
    def mch_refund_short(self, obj: Refund) -> str:
        return order_no_cell(obj.mch_refund_no, head=6)

    @admin.display(description="merchant", ordering="merchant__merchant_no")
    def merchant_no(self, obj: Refund) -> str:
        return format_html("<span title='{}'>{}</span>", obj.merchant.name, obj.merchant.merchant_no)

    @admin.display(description="created (UTC)", ordering="created_at")
    def created_utc(self, obj: Refund) -> str:
        return utc_short(obj.created_at)
