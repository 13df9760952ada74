from django.contrib import admin

from apps.currencies.models import Currency


@admin.register(Currency)
class CurrencyAdmin(admin.ModelAdmin):
    list_display = ["code", "name", "symbol", "minor_unit", "active"]
    list_filter = ["active"]
    search_fields = ["code", "name"]

    def get_readonly_fields(self, request, obj=None):
        # The scale of a currency in use never changes: every stored amount depends on it.
        return ["code", "minor_unit"] if obj else []

    def has_delete_permission(self, request, obj=None):
        return False
