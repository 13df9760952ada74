"""Admin of merchants, apps, keys, products and platform keys. Creating a merchant, uploading a key and
rotating the platform key go through the services (each its own durable transaction); private key
material is never shown."""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.utils.html import format_html
from django.utils.translation import ngettext
from django.urls import reverse

from apps.common import audit, signing
from apps.common.admin import ProposeChangeAdminMixin, render_action_form
from apps.common.models import StaffRequest
from apps.common.staff_requests import StaffRequestRefused, staff_request_create
from apps.merchants.forms import ConfirmForm, MerchantChangeForm, MerchantCreateForm, MerchantKeyUploadForm
from apps.merchants.models import (
    App,
    Merchant,
    MerchantCurrency,
    MerchantKey,
    MerchantProduct,
    PlatformKey,
    Product,
)
from apps.merchants.services import (
    MerchantInputError,
    merchant_create,
    merchant_key_revoke,
    platform_key_rotate,
)


def _bound(request) -> tuple:
    """Form data for a POST, nothing (an unbound form) for a GET."""
    return (request.POST, request.FILES) if request.method == "POST" else (None, None)


class AppInline(admin.TabularInline):
    model = App
    fields = ["app_id", "name", "is_active", "created_at"]
    readonly_fields = ["app_id", "created_at"]
    extra = 0

    def has_add_permission(self, request, obj=None):
        return False  # app ids are assigned by merchant_create

    def has_delete_permission(self, request, obj=None):
        return False


class MerchantKeyInline(admin.TabularInline):
    model = MerchantKey
    fields = ["version", "fingerprint", "created_at", "revoked_at"]
    readonly_fields = fields
    extra = 0
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False  # uploaded on the merchant key page, checked there

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class MerchantCurrencyInline(admin.TabularInline):
    model = MerchantCurrency
    fields = ["currency", "is_enabled", "payout_review_threshold", "payout_dual_approval_threshold"]
    extra = 0

    def has_delete_permission(self, request, obj=None):
        return False  # disable instead: balances and orders refer to the currency


class MerchantProductInline(admin.TabularInline):
    model = MerchantProduct
    fields = ["product", "is_enabled"]
    autocomplete_fields = ["product"]
    extra = 0

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Merchant)
class MerchantAdmin(ProposeChangeAdminMixin, admin.ModelAdmin):
    """Saving a merchant (its callback URLs, activation) or its inlines (currencies' review and two-approval
    thresholds, products, apps) asks for the change as one request (four eyes, apps.common.setting_changes). Adding a
    merchant stays immediate (merchant_create: no balance, no route for money until a payer pays it); who
    administers a merchant (superuser only) is saved at once and audited."""

    form = MerchantChangeForm
    staff_request_kind = StaffRequest.Kind.MERCHANT_SETTING
    propose_additions = False  # the add page is merchant_create's own form below
    list_display = ["merchant_no", "name", "is_active", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["merchant_no", "name"]
    readonly_fields = ["merchant_no", "created_at"]
    fields = ["merchant_no", "name", "is_active", "collection_callback_url", "payout_callback_url", "administrators",
              "created_at"]
    filter_horizontal = ["administrators"]
    inlines = [AppInline, MerchantKeyInline, MerchantCurrencyInline, MerchantProductInline]

    def add_view(self, request, form_url="", extra_context=None):
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = MerchantCreateForm(*_bound(request))
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                created = merchant_create(
                    name=data["name"], public_key_pem=data["public_key_pem"],
                    currencies=[c.code for c in data["currencies"]],
                    collection_callback_url=data["collection_callback_url"],
                    payout_callback_url=data["payout_callback_url"], actor=request.user,
                )
            except MerchantInputError as exc:
                form.add_error(None, str(exc))
            else:
                self.log_addition(request, created.merchant, [{"added": {}}])
                self.message_user(request, f"Merchant {created.merchant.merchant_no} created with app "
                                           f"{created.app.app_id} and key version 1.", messages.SUCCESS)
                return redirect(reverse("admin:merchants_merchant_change", args=[created.merchant.pk]))
        return render_action_form(self, request, form=form, title="Create a merchant", submit_label="Create merchant",
                                  intro="One app, key version 1 and the default products of each currency are created.")

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.name == "administrators":
            # Staff accounts only: the admin never lists or relates a merchant's portal users
            # (docs/staff-access.md, "Independence").
            kwargs["queryset"] = db_field.remote_field.model._default_manager.filter(is_staff=True)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        # Who administers a merchant decides who may not review its payouts: only a superuser changes it.
        readonly = list(super().get_readonly_fields(request, obj))
        return readonly if request.user.is_superuser else [*readonly, "administrators"]

    def save_related(self, request, form, formsets, change):
        before = set(form.instance.administrators.values_list("username", flat=True)) if change else set()
        super().save_related(request, form, formsets, change)
        after = set(form.instance.administrators.values_list("username", flat=True))
        if before != after:
            audit.record(actor=request.user, action="merchant.administrators", obj=form.instance,
                         old={"administrators": sorted(before)}, new={"administrators": sorted(after)})



@admin.register(MerchantKey)
class MerchantKeyAdmin(admin.ModelAdmin):
    list_display = ["merchant", "version", "fingerprint", "created_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["merchant__merchant_no", "fingerprint"]
    list_select_related = ["merchant"]
    fields = ["merchant", "version", "fingerprint", "public_key_pem", "created_at", "revoked_at"]
    readonly_fields = fields
    actions = ["revoke_selected"]

    def has_delete_permission(self, request, obj=None):
        return False  # revoke instead: the version stays on record

    def add_view(self, request, form_url="", extra_context=None):
        if not self.has_add_permission(request):
            raise PermissionDenied
        initial = {"merchant": request.GET.get("merchant")} if request.GET.get("merchant") else None
        form = MerchantKeyUploadForm(*_bound(request), initial=initial)
        if request.method == "POST" and form.is_valid():
            # Four eyes: a staff upload is a request; the key exists only once a second person approves it.
            try:
                staff_request = staff_request_create(
                    kind=StaffRequest.Kind.MERCHANT_KEY, requested_by=request.user, reason=form.cleaned_data["reason"],
                    payload={"merchant_no": form.cleaned_data["merchant"].merchant_no,
                             "public_key_pem": form.cleaned_data["public_key_pem"]})
            except StaffRequestRefused as exc:
                form.add_error(None, str(exc))
            else:
                self.message_user(request, f"Key upload for {form.cleaned_data['merchant'].merchant_no} requested "
                                           f"(request #{staff_request.pk}): the key verifies only after a second "
                                           f"person approves it.", messages.SUCCESS)
                return redirect(reverse("admin:common_staffrequest_changelist"))
        return render_action_form(self, request, form=form, title="Upload a merchant public key",
                                  submit_label="Request key version",
                                  intro="Once a second person approves the request, the key becomes the merchant's "
                                        "next version; older versions keep verifying until revoked.")

    @admin.action(description="Revoke selected keys (requests signed with them get 1104)", permissions=["change"])
    def revoke_selected(self, request, queryset):
        count = 0
        for key in queryset.select_related("merchant"):
            merchant_key_revoke(merchant_no=key.merchant.merchant_no, key_version=key.version, actor=request.user)
            count += 1
        self.message_user(request, ngettext("%(n)d key version revoked.", "%(n)d key versions revoked.", count)
                          % {"n": count}, messages.SUCCESS)


@admin.register(Product)
class ProductAdmin(ProposeChangeAdminMixin, admin.ModelAdmin):
    staff_request_kind = StaffRequest.Kind.PRODUCT_SETTING  # four eyes on fees and limits: saving asks
    # Fits 1280 px: the settlement as its code (D0, D1), its words in the tooltip and on the page.
    list_display = ["code", "kind", "currency", "settlement_short", "fee_fixed", "fee_rate_bps", "min_amount",
                    "max_amount", "is_active"]

    @admin.display(description="settles", ordering="settlement")
    def settlement_short(self, obj: Product) -> str:
        return format_html("<span title='{}'>{}</span>", obj.get_settlement_display(), obj.settlement)
    list_filter = ["kind", "currency", "settlement", "is_active"]
    search_fields = ["code"]

    def get_readonly_fields(self, request, obj=None):
        # Orders refer to a product by code, kind and currency: those never change once it exists.
        return ["code", "kind", "currency", "settlement"] if obj else []


@admin.register(PlatformKey)
class PlatformKeyAdmin(admin.ModelAdmin):
    list_display = ["version", "is_current", "fingerprint", "created_at"]
    fields = ["version", "is_current", "fingerprint", "public_key_pem", "created_at"]  # never the private half
    readonly_fields = fields

    @admin.display(description="fingerprint (SHA-256 of the public key)")
    def fingerprint(self, obj):
        return signing.fingerprint(obj.public_key_pem)

    def has_change_permission(self, request, obj=None):
        return False  # a key never changes; rotate to replace it

    def has_delete_permission(self, request, obj=None):
        return False  # merchants verify old callbacks with old versions

    def add_view(self, request, form_url="", extra_context=None):
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = ConfirmForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            key = platform_key_rotate(actor=request.user)
            self.log_addition(request, key, [{"added": {}}])
            self.message_user(request, f"Platform key version {key.version} is now current.", messages.SUCCESS)
            return redirect(reverse("admin:merchants_platformkey_changelist"))
        return render_action_form(self, request, form=form, title="Rotate the platform key",
                                  submit_label="Create and make current",
                                  intro="A new key version signs every callback from now on; older public keys "
                                        "stay published.")
