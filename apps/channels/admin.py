"""Channels and bank codes in the admin. Upstream credentials are write-only: typed into password fields, stored
encrypted (apps.common.crypto), never rendered again; the page only says whether each is set. Saving either page
asks for the change (four eyes, apps.common.setting_changes): it takes effect when a second person approves it. A
channel's refund rules have a page of their own, linked from the channel's, whose saves ask for a change of the
channel in the same way."""

from django import forms
from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from apps.channels.models import BankCode, Channel, RefundRule
from apps.channels.registry import payin_adapters, payout_adapters
from apps.channels.selectors import channel_health_label, channel_volume_today
from apps.common.admin import ProposeChangeAdminMixin
from apps.common.models import StaffRequest


class ChannelForm(forms.ModelForm):
    api_base_url = forms.URLField(required=False, assume_scheme="https",
                                  help_text="Upstream API root; empty: the adapter's default (XENDIT_API_BASE_URL).")
    secret_key = forms.CharField(
        required=False, strip=True, widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="The upstream's secret API key. Leave empty to keep the stored one; it is never shown again.")
    callback_token = forms.CharField(
        required=False, strip=True, widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="The webhook verification token (Xendit: x-callback-token). Leave empty to keep the stored one.")
    clear_credentials = forms.BooleanField(required=False, help_text="Remove both stored credentials.")

    class Meta:
        model = Channel
        fields = ["code", "name", "adapter", "direction", "currency", "is_active", "is_draining", "priority", "weight",
                  "min_amount", "max_amount", "bank_codes", "api_base_url"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        names = sorted(set(payin_adapters()) | set(payout_adapters()))
        self.fields["adapter"] = forms.ChoiceField(
            choices=[(name, name) for name in names],
            help_text="The registered adapter; a live deployment takes only real upstreams, a sandbox one only the "
                      "sandbox (docs/channels.md).")
        self.fields["weight"].required = False  # empty: the default share (100)

    def clean_weight(self):
        weight = self.cleaned_data.get("weight")
        return 100 if weight is None else weight

    def clean(self):
        # The typed credentials go onto the channel before the model's own clean() (run next, by _post_clean), so
        # that the upstream's configuration check asks with the key being configured; the proposal then carries
        # them encrypted, as the channel stores them (never in clear).
        data = super().clean()
        if data.get("clear_credentials"):
            self.instance.set_credentials(secret_key="", callback_token="")
        else:
            self.instance.set_credentials(secret_key=data.get("secret_key") or None,
                                          callback_token=data.get("callback_token") or None)
        return data


@admin.register(Channel)
class ChannelAdmin(ProposeChangeAdminMixin, admin.ModelAdmin):
    form = ChannelForm
    staff_request_kind = StaffRequest.Kind.CHANNEL_SETTING
    # Fits 1280 px (tests/operations/test_staff_pages_fit.py): direction and currency in one column, the active and
    # draining flags as one state, weight beside priority; credentials on the channel's own page only.
    list_display = ["code", "adapter", "serves", "state", "route_priority", "circuit", "orders_today",
                    "success_rate_today"]
    list_filter = ["adapter", "direction", "currency", "is_active", "is_draining"]
    search_fields = ["code", "name"]
    readonly_fields = ["circuit", "orders_today", "success_rate_today", "credentials", "webhook_path",
                       "refund_rules_of"]

    @admin.display(description="Serves", ordering="currency")
    def serves(self, obj: Channel) -> str:
        return f"{obj.get_direction_display()} {obj.currency_id}"

    @admin.display(description="State", ordering="-is_active")
    def state(self, obj: Channel) -> str:
        return "inactive" if not obj.is_active else "draining" if obj.is_draining else "active"

    @admin.display(description="Priority (weight)", ordering="priority")
    def route_priority(self, obj: Channel) -> str:
        return f"{obj.priority} ({obj.weight})"

    # Health and volume (docs/channels.md, "Health"): read-only; draining is a field of the form, so asking for it
    # is a staff request like any other change of the channel.
    @admin.display(description="Health")
    def circuit(self, obj: Channel) -> str:
        return channel_health_label(obj) if obj.pk else "-"

    @admin.display(description="Orders today")
    def orders_today(self, obj: Channel) -> str:
        return str(channel_volume_today(obj)["orders"]) if obj.pk else "-"

    @admin.display(description="Success today")
    def success_rate_today(self, obj: Channel) -> str:
        if not obj.pk:
            return "-"
        volume = channel_volume_today(obj)
        if not volume["finished"]:
            return "-"
        return f"{100 * volume['succeeded'] // volume['finished']}% ({volume['succeeded']} of {volume['finished']})"

    @admin.display(description="Credentials")
    def credentials(self, obj: Channel) -> str:
        secret = "secret key set" if obj.secret_key_encrypted else "no secret key"
        token = "callback token set" if obj.callback_token_encrypted else "no callback token"
        return f"{secret}, {token}"

    @admin.display(description="Webhook path")
    def webhook_path(self, obj: Channel) -> str:
        return (f"/channels/{obj.adapter}/{obj.code}/webhook" if obj.pk and obj.adapter in ("xendit", "paymongo")
                else "-")

    @admin.display(description="Refund rules")
    def refund_rules_of(self, obj: Channel) -> str:
        if not obj.pk or obj.direction != Channel.Direction.PAYIN:
            return "-"
        rules = "; ".join(refund_rule_words(rule) for rule in obj.refund_rules.order_by("method")) or (
            "none of its own: its adapter's")
        link = reverse("admin:channels_refundrule_changelist") + f"?channel__id__exact={obj.pk}"
        return format_html('{} (<a href="{}">change them</a>)', rules, link)

    def has_delete_permission(self, request, obj=None):
        return False  # deactivate instead (a change request): orders refer to their channel


def refund_rule_words(rule: RefundRule) -> str:
    if not rule.refundable:
        rest = "no refunds"
    else:
        rest = "in parts" if rule.partial else "only once, in full"
        rest += f", within {rule.window_days} days" if rule.window_days is not None else ""
    return f"{rule.method or 'every method'}: {rest}"


@admin.register(RefundRule)
class RefundRuleAdmin(ProposeChangeAdminMixin, admin.ModelAdmin):
    """A channel's refund rules (docs/channels.md, "Refund rules"), the page linked from the channel's. Adding or
    changing a rule asks for a change of the channel (four eyes, the channel's role): it holds for refunds created
    after a second person approves it. A rule is changed, never removed: the channel's refunds would otherwise fall
    back to its adapter's rules without anyone approving it."""

    staff_request_kind = StaffRequest.Kind.CHANNEL_SETTING
    list_display = ["channel", "method_shown", "refundable", "partial", "window_days"]
    list_filter = ["channel"]
    fields = ["channel", "method", "refundable", "partial", "window_days"]

    @admin.display(description="Method", ordering="method")
    def method_shown(self, obj: RefundRule) -> str:
        return obj.method or "every method"

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "channel":  # refunds give pay-ins back: a payout channel has no refunds to rule
            kwargs["queryset"] = Channel.objects.filter(direction=Channel.Direction.PAYIN)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(BankCode)
class BankCodeAdmin(ProposeChangeAdminMixin, admin.ModelAdmin):
    staff_request_kind = StaffRequest.Kind.BANK_CODE_SETTING
    list_display = ["currency", "code", "name", "kind", "is_active"]
    list_filter = ["currency", "kind", "is_active"]
    search_fields = ["code", "name"]

    def has_delete_permission(self, request, obj=None):
        return False  # deactivate instead (a change request)
