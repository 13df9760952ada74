"""Admin building blocks: read-only admins for append-only records, changelists read from the replica, and a page for
a one-form admin action."""

from datetime import timezone as dt_timezone

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import unquote
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django_otp.plugins.otp_static.models import StaticDevice
from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.common.errors import DomainError
from apps.common.formatting import utc
from apps.common.history import (TRACKED_MODELS, event_changes, event_model_of, event_who, grant_relations,
                                  grant_words)
from apps.common.models import AuditLog, StaffRequest
from apps.common.replica import lag_tolerant
from apps.common.setting_changes import setting_change
from apps.common.staff_requests import (KINDS, StaffRequestRefused, staff_request_approve, staff_request_changes,
                                        staff_request_changes_digest, staff_request_create, staff_request_reject)


def order_no_cell(number: str, *, head: int = 10, tail: int = 6) -> str:
    """A platform or merchant order number in a list column (fits 1280 px): its head and tail, the whole
    number in the tooltip (and on the order's page)."""
    if len(number) <= head + tail + 2:
        return number
    return format_html("<span title='{}'>{}\u2026{}</span>", number, number[:head], number[-tail:])


def cut_cell(value, *, em: int = 12) -> str:
    """A long text in a list column: one line, cut with an ellipsis at `em`, the whole text in the tooltip."""
    text = str(value or "")
    if not text:
        return "-"
    return format_html("<span class='cut' style='max-width:{}em' title='{}'>{}</span>", em, text, text)


class ReadOnlyAdminMixin:
    """Append-only records (ledger, audit): viewable with the view permission, never added, changed or deleted."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class LagTolerantChangelistMixin:
    """The changelist (GET) is read from the replica when it is healthy and says "as of" in its subtitle
    (docs/architecture.md, "Where reads go"); its actions (POST), every object's page and the person's permissions
    are read from the primary."""

    def changelist_view(self, request, extra_context=None):
        if request.method != "GET":
            return super().changelist_view(request, extra_context)
        request.user.get_all_permissions()  # cached on the user now, from the primary

        def page(reads):
            context = dict(extra_context or {})
            if reads.on_replica:
                context["subtitle"] = f"Read from the replica, as of {utc(reads.as_of)}"
            response = super(LagTolerantChangelistMixin, self).changelist_view(request, context)
            return response.render() if hasattr(response, "render") else response  # its rows, read here

        return lag_tolerant(page)


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


class ProposeChangeAdminMixin:
    """Four eyes on a money setting's admin page (apps.common.setting_changes): saving the form (and its inlines)
    does not write; it asks for the change as one StaffRequest of `staff_request_kind`, with a required reason, and
    a second person with the kind's role applies it from "Staff requests". `propose_additions = False` leaves adding
    immediate (adding a deny-list entry only holds more payouts back)."""

    staff_request_kind: str
    propose_additions = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.form = type(f"Propose{self.form.__name__}", (self.form,), {"change_reason": forms.CharField(
            label="Reason for the change", max_length=255, widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
            help_text="Required. Saving asks for this change; it takes effect only when a second person with the "
                      "same role approves it (Staff requests).")})

    def _proposing(self, request, object_id) -> bool:
        return request.method == "POST" and (object_id is not None or self.propose_additions)

    def get_fields(self, request, obj=None):
        fields = list(super().get_fields(request, obj))
        if (obj is not None or self.propose_additions) and "change_reason" not in fields:
            fields.append("change_reason")
        if obj is None and not self.propose_additions and "change_reason" in fields:
            fields.remove("change_reason")
        return fields

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)
        if obj is None and not self.propose_additions:
            form.base_fields.pop("change_reason", None)
        return form

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        if not self._proposing(request, object_id):
            return super().changeform_view(request, object_id, form_url, extra_context)
        # Not in the admin's transaction: nothing is written here but the request, in its own durable transaction.
        request._setting_changes = []
        return self._changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request, obj, form, change):
        if not hasattr(request, "_setting_changes"):
            return super().save_model(request, obj, form, change)
        request._setting_parent = obj
        request._setting_reason = form.cleaned_data["change_reason"]
        request._setting_changes.append(setting_change(proposed=obj))

    def save_related(self, request, form, formsets, change):
        if not hasattr(request, "_setting_changes"):
            return super().save_related(request, form, formsets, change)
        if change:
            form.save_m2m()  # many-to-many fields (a merchant's administrators) are not money settings
        for formset in formsets:
            formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []  # nothing saved
            for inline in formset.forms:
                if inline.has_changed() and inline not in formset.deleted_forms:
                    request._setting_changes.append(setting_change(proposed=inline.save(commit=False)))
        changes = [change for change in request._setting_changes if change]
        request._staff_request = None
        if changes:
            parent = request._setting_parent
            request._staff_request = staff_request_create(
                kind=self.staff_request_kind, requested_by=request.user, reason=request._setting_reason,
                payload={"changes": changes, "parent": {"model": parent._meta.label_lower, "pk": parent.pk}})

    def _changeform_view(self, request, object_id, form_url, extra_context):
        try:
            return super()._changeform_view(request, object_id, form_url, extra_context)
        except StaffRequestRefused as exc:
            self.message_user(request, f"Refused: {exc}", messages.ERROR)
            return redirect(request.get_full_path())

    def log_addition(self, request, obj, message):
        if not hasattr(request, "_setting_changes"):
            return super().log_addition(request, obj, message)

    def log_change(self, request, obj, message):
        if not hasattr(request, "_setting_changes"):
            return super().log_change(request, obj, message)

    def _proposed_response(self, request):
        created = request._staff_request
        if created is None:
            self.message_user(request, "Nothing changed: no request was made.", messages.INFO)
            return redirect(reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist"))
        self.message_user(request, f"Change requested (request #{created.pk}): it takes effect only when a second "
                                   f"person approves it. {created.summary}", messages.SUCCESS)
        return redirect(reverse("admin:common_staffrequest_change", args=[created.pk]))

    def response_add(self, request, obj, post_url_continue=None):
        if not hasattr(request, "_setting_changes"):
            return super().response_add(request, obj, post_url_continue)
        return self._proposed_response(request)

    def response_change(self, request, obj):
        if not hasattr(request, "_setting_changes"):
            return super().response_change(request, obj)
        return self._proposed_response(request)


@admin.register(AuditLog)
class AuditLogAdmin(LagTolerantChangelistMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "actor_label", "action", "object_type", "object_id"]
    list_filter = ["action", "object_type"]
    search_fields = ["object_id", "actor_label", "action"]
    date_hierarchy = "created_at"


class SettingsHistoryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The settings audit trail of one tracked model (apps.common.history): every insert, update and delete with who,
    when, and the old and new value of each field that changed. Read-only; the table itself is append-only."""

    list_display = ["pgh_created_at_display", "changed_object", "change_kind", "who", "changes"]
    list_filter = ["pgh_label"]
    list_select_related = ["pgh_context"]
    list_per_page = 50
    ordering = ["-pgh_id"]
    show_full_result_count = False

    def lookup_allowed(self, lookup, value, request=None):
        return lookup in ("pgh_obj", "pgh_obj__exact") or super().lookup_allowed(lookup, value, request)

    @admin.display(description="when (UTC)", ordering="pgh_id")
    def pgh_created_at_display(self, event):
        return f"{event.pgh_created_at.astimezone(dt_timezone.utc):%Y-%m-%d %H:%M:%S} UTC"

    @admin.display(description="change", ordering="pgh_label")
    def change_kind(self, event):
        return {"insert": "created", "update": "changed", "delete": "deleted", "grant": "granted",
                "revoke": "revoked", "password_set": "password changed"}.get(event.pgh_label, event.pgh_label)

    @admin.display(description="object")
    def changed_object(self, event):
        return f"{self.model.pgh_tracked_model._meta.verbose_name} #{event.pgh_obj_id}"

    @admin.display(description="who")
    def who(self, event):
        return event_who(event)

    @admin.display(description="changes (old \u2192 new)")
    def changes(self, event):
        rows = [(name, _shown(name, old), _shown(name, new)) for name, (old, new) in event_changes(event).items()]
        return format_html_join(mark_safe("<br>"), "<b>{}</b>: {} \u2192 {}", rows) or "\u2014"

    def get_fields(self, request, obj=None):
        return ["pgh_created_at_display", "change_kind", "changed_object", "who", "changes"]

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)


class StaffUserHistoryAdmin(SettingsHistoryAdmin):
    """Staff accounts (django.contrib.auth's User, apps.common.models.UserEvent): who created, (de)activated, made
    staff or superuser, renamed whom. The password hash and last_login are not in the event table at all."""

    @admin.display(description="object")
    def changed_object(self, event):
        return f"user {event.username}"


class StaffGrantHistoryAdmin(SettingsHistoryAdmin):
    """Roles and permissions (memberships of User.groups, User.user_permissions, Group.permissions): each row a
    grant or a revocation, in words: "rita: groups + Risk reviewer", and who did it."""

    list_display = ["pgh_created_at_display", "change_kind", "granted", "who"]

    def lookup_allowed(self, lookup, value, request=None):
        return admin.ModelAdmin.lookup_allowed(self, lookup, value, request)

    def get_queryset(self, request):
        # The names of a page's holders and grants in a few queries, not two per row. Prefetched, not joined: a
        # grant to a user or group deleted since stays listed (the relations have no database constraint).
        queryset = super().get_queryset(request)
        relations = grant_relations(queryset.model)
        permissions = [f"{name}__content_type" for name in relations
                       if queryset.model._meta.get_field(name).related_model._meta.label == "auth.Permission"]
        return queryset.prefetch_related(*relations, *permissions)

    @admin.display(description="what (+ granted, \u2212 revoked)")
    def granted(self, event):
        return grant_words(event)

    def get_fields(self, request, obj=None):
        return ["pgh_created_at_display", "change_kind", "granted", "who"]


class SecondFactorHistoryAdmin(SettingsHistoryAdmin):
    """Authenticators and recovery codes (apps.common.models.AuthenticatorEvent, RecoveryCodesEvent): who added,
    confirmed or deleted whose second factor. Never a key: the event table has none."""

    list_select_related = ["pgh_context", "user"]

    @admin.display(description="object")
    def changed_object(self, event):
        try:
            owner = event.user.get_username()
        except User.DoesNotExist:  # the account was deleted since
            owner = f"user #{event.user_id}"
        return f"{self.model.pgh_tracked_model._meta.verbose_name} #{event.pgh_obj_id} of {owner}"


MASKED_FIELDS = {"payee_account"}  # shown as on every other admin page: the last four digits


def _shown(name: str, value) -> str:
    if value is None:
        return "\u2014"
    text = str(value)
    if name in MASKED_FIELDS:
        return "\u2022\u2022\u2022\u2022" + text[-4:]
    return text if len(text) <= 60 else f"{text[:40]}\u2026 ({len(text)} characters)"


def register_settings_history() -> None:
    for tracked_model in TRACKED_MODELS:
        event_model = event_model_of(tracked_model)
        if admin.site.is_registered(event_model):
            continue
        if not any(field.name == "pgh_obj" for field in event_model._meta.fields):
            admin.site.register(event_model, StaffGrantHistoryAdmin)
        elif tracked_model._meta.label == "auth.User":
            admin.site.register(event_model, StaffUserHistoryAdmin)
        elif tracked_model in (TOTPDevice, StaticDevice):
            admin.site.register(event_model, SecondFactorHistoryAdmin)
        else:
            admin.site.register(event_model, SettingsHistoryAdmin)


register_settings_history()


# --- Staff accounts only (docs/staff-access.md, "Independence") ----------------------------------------------------
# The admin manages staff accounts and their second factors, never a merchant's portal users (Django users that are
# never staff, docs/portal.md): whoever sets a merchant user's password or removes their authenticator takes their
# seat in the portal, its keys, callback URLs and payouts. A merchant user is recognised as a user who is not staff,
# so apps.common needs no knowledge of apps.portal.

NOT_A_STAFF_ACCOUNT = ("{what} a merchant's portal user, not a staff account: staff do not see, change, "
                       "reset, delete or sign in as a merchant user in the admin, nor touch their second factors. "
                       "A merchant user who lost their authenticator is recovered as docs/staff-access.md, "
                       "\"Independence\", describes. Nothing was changed.")


class StaffAccountsOnlyMixin:
    """A staff-only admin: its list and every page of one object know only rows of staff accounts (`staff_filter`);
    the URL of another row answers with the reason and the list, and changes nothing."""

    staff_filter: str

    def get_queryset(self, request):
        return super().get_queryset(request).filter(**{self.staff_filter: True})

    def _merchant_user_row(self, request, object_id):
        """The redirect that refuses a page of a merchant user's row, else None (also for a staff member without
        this page's view permission: Django's own answer, which says nothing about the row)."""
        if object_id is None or not self.has_view_or_change_permission(request):
            return None
        model = self.model
        try:
            pk = model._meta.pk.to_python(unquote(str(object_id)))
        except (ValidationError, ValueError):
            return None
        if not model._default_manager.filter(pk=pk).exclude(**{self.staff_filter: True}).exists():
            return None
        what = f"{model._meta.verbose_name.capitalize()} #{pk} {'is' if model is User else 'belongs to'}"
        self.message_user(request, NOT_A_STAFF_ACCOUNT.format(what=what), messages.ERROR)
        return redirect(reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist"))

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        return (self._merchant_user_row(request, object_id)
                or super().changeform_view(request, object_id, form_url, extra_context))

    def delete_view(self, request, object_id, extra_context=None):
        return self._merchant_user_row(request, object_id) or super().delete_view(request, object_id, extra_context)

    def history_view(self, request, object_id, extra_context=None):
        return self._merchant_user_row(request, object_id) or super().history_view(request, object_id, extra_context)


class StaffAccountAdmin(StaffAccountsOnlyMixin, UserAdmin):
    """Django's user admin for staff accounts only: a merchant user's account, password and history are not
    reachable, and an account added here is a staff account (it signs in to the admin, never to the portal)."""

    staff_filter = "is_staff"
    # Every account listed is staff: the columns and filters say what differs among them.
    list_display = ["username", "email", "first_name", "last_name", "is_superuser", "is_active"]
    list_filter = ["is_superuser", "is_active", "groups"]

    def get_readonly_fields(self, request, obj=None):
        # A staff account stays one: switched off with "Active", never turned into a user that looks like a
        # merchant's (and would leave this list).
        readonly = list(super().get_readonly_fields(request, obj))
        return [*readonly, "is_staff"] if obj is not None else readonly

    def user_change_password(self, request, id, form_url=""):
        return self._merchant_user_row(request, id) or super().user_change_password(request, id, form_url)

    def save_model(self, request, obj, form, change):
        if not change:
            obj.is_staff = True
        super().save_model(request, obj, form, change)


if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, StaffAccountAdmin)


class StaffSecondFactorAdmin(StaffAccountsOnlyMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Staff members' second factors (apps.common.staff_signin): who has one, since when it was last used. Never the
    secret (django-otp's own admin shows a device's QR code to any superuser; this one takes its place). A lost
    phone: delete the member's authenticator (delete permission); they enrol a new one at their next sign-in, with
    their password, and whoever deleted it can no longer approve that member's requests, nor the member theirs
    (docs/staff-access.md, "Independence"). Only staff members' devices: never a merchant user's."""

    staff_filter = "user__is_staff"
    list_display = ["user", "name", "confirmed", "last_used_at"]
    list_filter = ["confirmed"]
    search_fields = ["user__username"]
    fields = ["user", "name", "confirmed", "created_at", "last_used_at"]
    readonly_fields = fields
    list_select_related = ["user"]

    def has_delete_permission(self, request, obj=None):
        if obj is not None and not obj.user.is_staff:
            return False
        return admin.ModelAdmin.has_delete_permission(self, request, obj)


admin.site.register(TOTPDevice, StaffSecondFactorAdmin)
admin.site.register(StaticDevice, StaffSecondFactorAdmin)

class StaffReasonForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), max_length=255,
                             help_text="Required. Kept in the audit trail.")

    def clean_reason(self):
        reason = self.cleaned_data["reason"].strip()
        if not reason:
            raise forms.ValidationError("A reason is required.")
        return reason


def staff_request_change_view(request_obj: StaffRequest) -> dict:
    """The whole change of one request as its pages show it (admin/common/staffrequest/_changes.html): every field,
    its value now and once approved, read now; and the digest the approval form sends back (staff_request_approve's
    `seen`)."""
    try:
        lines = staff_request_changes(request_obj)
    except (StaffRequestRefused, LookupError) as exc:
        return {"request": request_obj, "lines": [], "error": str(exc), "seen": "",
                "decided": request_obj.status != StaffRequest.Status.PENDING}
    return {"request": request_obj, "lines": lines, "error": "", "seen": staff_request_changes_digest(lines),
            "moved": any(line.asked is not None for line in lines),
            "decided": request_obj.status != StaffRequest.Status.PENDING}


@admin.register(StaffRequest)
class StaffRequestAdmin(admin.ModelAdmin):
    """Four eyes for staff changes: what one person asked for, waiting for a second person's decision. A new
    request here is the kind with a request page of its own (the balance adjustment, from apps.ledger); reversals
    are asked for on the payout list, key uploads on the merchant key page."""

    list_display = ["id", "kind", "what", "status", "requested_by_name", "created_at_utc", "decided_by_name"]
    list_filter = []  # the filter column would cut the table off at 1280 px; the status column sorts
    list_select_related = ["requested_by", "decided_by"]
    # People as names, not links: an operator has no permission on the user pages, and a link answering 403 helps
    # nobody.
    fields = ["kind", "summary", "reason", "status", "requested_by_name", "created_at_utc", "decided_by_name",
              "decided_at_utc", "decision_reason", "result_display"]
    readonly_fields = fields
    actions = ["approve_selected", "reject_selected"]

    @admin.display(description="result")
    def result_display(self, obj):
        # The change itself is the table above the fields; here what the service answered (a key version...).
        return ", ".join(f"{name}: {value}" for name, value in (obj.result or {}).items() if name != "changes") or "-"

    @admin.display(description="what")
    def what(self, obj):
        # Whole and wrapped, not cut like the other cells: the kinds' summaries name every field, credentials first
        # (the values are on the request's page).
        return format_html("<span class='wrap'>{}</span>", obj.summary)

    @admin.display(description="requested by", ordering="requested_by__username")
    def requested_by_name(self, obj):
        return obj.requested_by.get_username()

    @admin.display(description="decided by")
    def decided_by_name(self, obj):
        return obj.decided_by.get_username() if obj.decided_by_id else "-"

    @admin.display(description="asked at (UTC)", ordering="created_at")
    def created_at_utc(self, obj):
        return utc(obj.created_at)

    @admin.display(description="decided at (UTC)")
    def decided_at_utc(self, obj):
        return utc(obj.decided_at)

    def _may_decide(self, request) -> bool:
        return any(request.user.has_perm(spec.permission) for spec in KINDS.values())

    def get_queryset(self, request):
        # Each person sees the kinds their role decides, and their own requests: a risk reviewer (deny list) is not
        # shown balance adjustments or channel changes.
        queryset = super().get_queryset(request)
        if request.user.is_superuser or not self.has_view_permission(request):
            return queryset  # nobody's list to narrow: the pages answer 403
        kinds = [kind for kind, spec in KINDS.items() if request.user.has_perm(spec.permission)]
        return queryset.filter(Q(kind__in=kinds) | Q(requested_by=request.user))

    def has_view_permission(self, request, obj=None):
        return self._may_decide(request) or super().has_view_permission(request, obj)

    def has_module_permission(self, request):
        return self.has_view_permission(request)

    def _request_page(self, request):
        """The page "Add" opens: the first registered kind with a request page this person may ask for, or None."""
        return next((spec.request_page for spec in KINDS.values()
                     if spec.request_page is not None and request.user.has_perm(spec.permission)), None)

    def has_add_permission(self, request):
        return self._request_page(request) is not None

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_decide_permission(self, request) -> bool:
        return self._may_decide(request)

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        extra_context = {**(extra_context or {}), "show_save": False, "show_save_and_continue": False,
                         "show_save_and_add_another": False, "show_delete": False}
        shown = self.get_object(request, object_id) if object_id else None
        if shown is not None:
            extra_context["staff_change"] = staff_request_change_view(shown)
        return super().changeform_view(request, object_id, form_url, extra_context)

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {**(extra_context or {}), "is_nav_sidebar_enabled": False})

    def add_view(self, request, form_url="", extra_context=None):
        page = self._request_page(request)
        if page is None:
            raise PermissionDenied
        return page(request, {**self.admin_site.each_context(request), "opts": self.model._meta})

    def _decide(self, request, queryset, *, approve: bool):
        form = StaffReasonForm(request.POST if "apply" in request.POST else None)
        if form.is_bound and form.is_valid():
            for pk in queryset.values_list("pk", flat=True):
                try:
                    if approve:
                        # The change as this approver read it on the approval page; a form without it (an older
                        # tab) is refused rather than applied unread.
                        done = staff_request_approve(request_id=pk, approver=request.user,
                                                     reason=form.cleaned_data["reason"],
                                                     seen=request.POST.get(f"seen_{pk}", ""))
                    else:
                        done = staff_request_reject(request_id=pk, approver=request.user,
                                                    reason=form.cleaned_data["reason"])
                except (ValueError, LookupError, DomainError) as exc:  # DomainError: ServiceBusy, "try again"
                    self.message_user(request, f"Request #{pk} refused: {getattr(exc, 'msg', None) or exc}",
                                      messages.ERROR)
                else:
                    self.message_user(request, f"Request #{pk} {done.get_status_display().lower()}.",
                                      messages.SUCCESS)
            return None
        context = {
            **self.admin_site.each_context(request), "opts": self.model._meta, "form": form,
            "title": "Approve requests" if approve else "Reject requests",
            "intro": "Approving applies each change now, in one transaction with its audit row." if approve
                     else "A rejected request never takes effect.",
            "submit_label": "Approve" if approve else "Reject",
            "requests": [staff_request_change_view(item) for item in queryset.select_related("requested_by")],
            "action": "approve_selected" if approve else "reject_selected",
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/common/staffrequest/action_form.html", context)

    @admin.action(description="Approve selected requests (asks for a reason)", permissions=["decide"])
    def approve_selected(self, request, queryset):
        return self._decide(request, queryset, approve=True)

    @admin.action(description="Reject selected requests (asks for a reason)", permissions=["decide"])
    def reject_selected(self, request, queryset):
        return self._decide(request, queryset, approve=False)
