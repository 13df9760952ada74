"""The ledger in the admin: read-only. Money moves only through services; a correction is a new posting."""

from django.contrib import admin

from apps.common.admin import LagTolerantChangelistMixin, ReadOnlyAdminMixin, cut_cell
from apps.common.formatting import utc_short
from apps.ledger.models import Entry, Hold, LedgerAccount, Posting, Statement
from apps.ledger.selectors import account_balance


class EntryInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Entry
    fields = ["account", "currency", "amount"]
    readonly_fields = fields
    extra = 0


@admin.register(LedgerAccount)
class LedgerAccountAdmin(LagTolerantChangelistMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
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
class PostingAdmin(LagTolerantChangelistMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "kind", "cause", "merchant", "currency", "created_at"]
    list_filter = ["kind", "currency"]
    search_fields = ["cause", "merchant__merchant_no"]
    list_select_related = ["merchant"]
    date_hierarchy = "created_at"
    inlines = [EntryInline]


@admin.register(Entry)
class EntryAdmin(LagTolerantChangelistMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "posting", "account", "currency", "amount"]
    list_filter = ["currency"]
    search_fields = ["posting__cause"]
    list_select_related = ["posting", "account", "account__merchant"]


@admin.register(Hold)
class HoldAdmin(LagTolerantChangelistMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    # Fits 1280 px: the cause cut (whole in its tooltip), the merchant by number, times to the minute.
    list_display = ["id", "amount", "currency", "status", "cause_short", "merchant_no", "created_short",
                    "resolved_short"]
    list_filter = ["status", "currency"]
    search_fields = ["cause", "merchant__merchant_no"]
    list_select_related = ["merchant"]

    @admin.display(description="cause", ordering="cause")
    def cause_short(self, hold: Hold) -> str:
        return cut_cell(hold.cause, em=16)

    @admin.display(description="merchant", ordering="merchant__merchant_no")
    def merchant_no(self, hold: Hold) -> str:
        return hold.merchant.merchant_no

    @admin.display(description="created (UTC)", ordering="created_at")
    def created_short(self, hold: Hold) -> str:
        return utc_short(hold.created_at)

    @admin.display(description="resolved (UTC)", ordering="resolved_at")
    def resolved_short(self, hold: Hold) -> str:
        return utc_short(hold.resolved_at)


@admin.register(Statement)
class StatementAdmin(LagTolerantChangelistMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Stored daily statements (docs/api.md, "Statements"), as served to the merchant."""

    list_display = ["id", "merchant", "currency", "date", "key_version", "created_at"]
    list_filter = ["currency"]
    search_fields = ["merchant__merchant_no"]
    list_select_related = ["merchant"]
    date_hierarchy = "date"
