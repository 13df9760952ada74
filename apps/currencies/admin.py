from django.contrib import admin

from apps.common.admin import ProposeChangeAdminMixin
from apps.common.models import StaffRequest
from apps.currencies.models import Currency


@admin.register(Currency)
class CurrencyAdmin(ProposeChangeAdminMixin, admin.ModelAdmin):
    staff_request_kind = StaffRequest.Kind.CURRENCY_SETTING  # four eyes: saving asks for the change
    list_display = ["code", "name", "symbol", "minor_unit", "active"]
    list_filter = ["active"]
    search_fields = ["code", "name"]

    def get_readonly_fields(self, request, obj=None):
        # The scale of a currency in use never changes: every stored amount depends on it.
        return ["code", "minor_unit"] if obj else []

    def has_delete_permission(self, request, obj=None):
        return False
