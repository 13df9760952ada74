"""The ledger in the admin: read-only. Money moves only through services; a correction is a new posting."""

from django.contrib import admin

from apps.common.admin import ReadOnlyAdminMixin
from apps.ledger.models import Entry, Hold, LedgerAccount, Posting, Statement
from apps.ledger.selectors import account_balance


class EntryInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Entry
    fields = ["account", "currency", "amount"]
    readonly_fields = fields
    extra = 0


@admin.register(LedgerAccount)
class LedgerAccountAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "merchant", "currency", "kind", "current_balance", "updated_at"]
    list_filter = ["kind", "currency"]
    search_fields = ["merchant__merchant_no"]
    list_select_related = ["merchant"]
    exclude = ["balance"]
    readonly_fields = ["current_balance"]

    @admin.display(description="balance")
    def current_balance(self, account: LedgerAccount) -> int:
        return account_balance(account)  # a platform account's is the sum of its entries


@admin.register(Posting)
class PostingAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "kind", "cause", "merchant", "currency", "created_at"]
    list_filter = ["kind", "currency"]
    search_fields = ["cause", "merchant__merchant_no"]
    list_select_related = ["merchant"]
    date_hierarchy = "created_at"
    inlines = [EntryInline]


@admin.register(Entry)
class EntryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "posting", "account", "currency", "amount"]
    list_filter = ["currency"]
    search_fields = ["posting__cause"]
    list_select_related = ["posting", "account", "account__merchant"]


@admin.register(Hold)
class HoldAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "cause", "merchant", "currency", "amount", "status", "created_at", "resolved_at"]
    list_filter = ["status", "currency"]
    search_fields = ["cause", "merchant__merchant_no"]
    list_select_related = ["merchant"]


@admin.register(Statement)
class StatementAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Stored daily statements (docs/api.md §8), as served to the merchant."""

    list_display = ["id", "merchant", "currency", "date", "key_version", "created_at"]
    list_filter = ["currency"]
    search_fields = ["merchant__merchant_no"]
    list_select_related = ["merchant"]
    date_hierarchy = "date"
