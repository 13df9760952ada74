from django.contrib import admin

from apps.collection.models import CollectionOrder
from apps.collection.sweep import STRANDED
from apps.common.stranded import stranded_list_filter
from apps.currencies.formatting import format_minor


@admin.register(CollectionOrder)
class CollectionOrderAdmin(admin.ModelAdmin):
    """Read-only view of pay-ins: money only moves through apps.collection.services."""

    list_display = ("platform_order_no", "mch_order_no", "merchant", "status", "amount_display", "fee", "currency",
                    "settlement", "created_at", "paid_at", "settled_at")
    list_filter = ("status", "merchant", "currency", "settlement", ("created_at", admin.DateFieldListFilter),
                   ("paid_at", admin.DateFieldListFilter), stranded_list_filter(STRANDED))
    search_fields = ("=platform_order_no", "=mch_order_no")
    date_hierarchy = "created_at"
    list_select_related = ("merchant", "currency")
    ordering = ("-id",)
    fields = ("platform_order_no", "mch_order_no", "merchant", "status", "product", "settlement", "channel",
              "route_reason", "currency", "amount", "fee", "net_amount", "subject", "attach", "return_url",
              "expire_seconds", "expire_at", "paid_at", "settled_at", "upstream_reference", "created_at", "updated_at")
    readonly_fields = fields  # every field: state and money change only through the services

    @admin.display(description="amount", ordering="amount")
    def amount_display(self, obj: CollectionOrder) -> str:
        return format_minor(obj.amount, obj.currency)

    @admin.display(description="net (amount − fee)")
    def net_amount(self, obj: CollectionOrder) -> int:
        return obj.net_amount

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
