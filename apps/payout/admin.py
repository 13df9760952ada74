"""Payouts in the admin: the risk review queue (approve / reject), all orders (read-only, ops "Reverse"), the deny list.

Payee account numbers are shown masked everywhere here. Every decision goes through a payout service, which
checks the order's state and the reviewer's role, moves the money and writes the audit row shown on the order.
Actions run in the changelist view, outside any admin transaction, as the durable services require.
"""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.core.validators import MaxValueValidator
from django.db.models import Q
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join
from django.shortcuts import get_object_or_404, redirect
from django.urls import path, reverse

from apps.common.admin import LagTolerantChangelistMixin, ProposeChangeAdminMixin, cut_cell, order_no_cell
from apps.common.formatting import short_age, utc, utc_short
from apps.common.models import StaffRequest
from apps.common.retry import ServiceBusy
from apps.common.staff_requests import StaffRequestRefused, staff_request_create
from apps.common.stranded import stranded_list_filter
from apps.currencies.formatting import format_minor, money
from apps.payout.models import DenyListedAccount, Payout, PayoutApproval, PayoutReviewQueue
from apps.ledger.selectors import merchant_balances
from apps.payout.selectors import (merchant_recent_payouts, payee_history, payout_approvals_count, payout_decisions,
                                   payout_risk_tags)
from apps.payout.sweep import STRANDED
from apps.payout.services import (REVERSE_PERMISSION, REVIEW_PERMISSION, DecisionOutcome, PayoutActionRefused,
                                  PayoutNotFound, payout_approve, payout_reject)


class ReasonForm(forms.Form):
    """A decision's reason: required for approval and rejection alike (four eyes, docs/back-office.md)."""

    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), max_length=255,
                             error_messages={"required": "A reason is required to decide a payout."},
                             help_text="Required. Kept in the audit trail (sent to the merchant as fail_reason on "
                                       "a rejection).")

    def clean_reason(self):
        reason = self.cleaned_data["reason"].strip()
        if not reason:
            raise forms.ValidationError("A reason is required to decide a payout.")
        return reason


RejectForm = ReasonForm


class ReverseForm(forms.Form):
    reversal_amount = forms.IntegerField(min_value=1, help_text="Minor units, 1 to the payout amount.")
    fee_refund = forms.IntegerField(min_value=0, help_text="Minor units, 0 to the payout fee.")
    reason = forms.CharField(max_length=255, help_text="Why (bank return, clawback ticket...). Kept in the audit.")

    def __init__(self, *args, payout: Payout, **kwargs):
        super().__init__(*args, **kwargs)
        # The service checks the bounds again under the row lock; these only give a friendlier form error.
        for name, bound in (("reversal_amount", payout.amount), ("fee_refund", payout.fee)):
            self.fields[name].validators.append(MaxValueValidator(bound))
            self.fields[name].widget.attrs["max"] = bound


def payout_status_label(payout: Payout) -> str:
    """The status as staff read it: a reversed payout stays SUCCESS (contract), but is never shown as a plain
    "Success"."""
    label = payout.get_status_display()
    if payout.reversed_at is not None:
        partly = payout.reversal_amount is not None and payout.reversal_amount < payout.amount
        return f"{label}, {'partly ' if partly else ''}reversed"
    return label


def payout_deciders(payout: Payout) -> list[PayoutApproval]:
    """The decision rows that decided a payout out of review: every approval of an approved one (two when it needed
    two), or the rejection; none while it is in review."""
    if payout.reviewed_at is None:
        return []
    rows = list(payout.approvals.select_related("reviewer").order_by("created_at", "id"))
    rejected = [row for row in rows if row.decision == PayoutApproval.Decision.REJECT]
    return rejected[-1:] if rejected else [row for row in rows if row.decision == PayoutApproval.Decision.APPROVE]


def decider_name(row: PayoutApproval) -> str:
    """A staff member's username, or for a decision made from the CLI (no staff user) the operator's label its
    row carries ("cli:rosa")."""
    return row.reviewer.get_username() if row.reviewer_id else row.actor_label


def payout_reviewed_by_label(payout: Payout) -> str:
    """Who decided: every approver of an approved payout ("rita and rolf" when it needed two), or who rejected it;
    never "-" for a decided payout."""
    names = [decider_name(row) for row in payout_deciders(payout)]
    if not names and payout.reviewed_by_id:
        names = [payout.reviewed_by.get_username()]
    return " and ".join(names) or "-"


def next_in_queue(payout: Payout, reviewer) -> Payout | None:
    """The next payout a reviewer works on after this one: the queue's order (oldest first), skipping the ones this
    reviewer has already decided (a payout waiting for its second approval by someone else)."""
    queue = (Payout.objects.filter(status=Payout.Status.FROZEN).exclude(pk=payout.pk)
             .exclude(approvals__reviewer=reviewer).order_by("created_at", "id"))
    later = queue.filter(Q(created_at__gt=payout.created_at) | Q(created_at=payout.created_at, id__gt=payout.pk))
    return later.first() or queue.first()


class PayoutDisplayMixin:
    """Columns and detail fields shared by the queue and the all-orders page; nothing here shows a full account."""

    list_select_related = ["merchant", "currency"]
    # Merchant, currency, product and channel as plain text: a reviewer has no permission on their pages, and a
    # link answering 403 helps nobody. Times say UTC, like the audit trail.
    detail_fields = ["platform_order_no", "mch_order_no", "merchant_text", "status", "review_required",
                     "approvals_display", "risk_reasons_display", "amount_display", "fee_display", "currency_text",
                     "product_text", "channel_text", "route_reason", "payee_name", "payee", "bank_code", "attach",
                     "created_utc",
                     "age", "reviewed_by_text", "reviewed_utc", "review_reason", "upstream_reference", "submitted_utc",
                     "finished_utc", "fail_reason", "reversed_utc", "reversal_amount_display", "fee_refund_display",
                     "decision_history"]
    # The status as staff read it ("Success, reversed"), on every payout page.
    detail_fields = [("status_text" if name == "status" else name) for name in detail_fields]

    def get_fields(self, request, obj=None):
        return self.detail_fields

    def get_readonly_fields(self, request, obj=None):
        return self.detail_fields  # money, state and history change only through the services

    @admin.display(description="amount", ordering="amount")
    def amount_display(self, obj: Payout) -> str:
        return money(obj.amount, obj.currency)

    @admin.display(description="status", ordering="status")
    def status_text(self, obj: Payout) -> str:
        return payout_status_label(obj)

    @admin.display(description="payout", ordering="created_at")
    def order_short(self, obj: Payout) -> str:
        return order_no_cell(obj.platform_order_no)

    @admin.display(description="merchant order", ordering="mch_order_no")
    def mch_order_short(self, obj: Payout) -> str:
        return order_no_cell(obj.mch_order_no, head=6)

    @admin.display(description="merchant", ordering="merchant__merchant_no")
    def merchant_no(self, obj: Payout) -> str:
        return format_html("<span title='{}'>{}</span>", obj.merchant.name, obj.merchant.merchant_no)

    @admin.display(description="created (UTC)", ordering="created_at")
    def created_short(self, obj: Payout) -> str:
        return utc_short(obj.created_at)

    @admin.display(description="payee", ordering="bank_code")
    def payee_and_bank(self, obj: Payout) -> str:
        return f"{obj.masked_payee_account} {obj.bank_code}"

    @admin.display(description="payee name")
    def payee_name_short(self, obj: Payout) -> str:
        return cut_cell(obj.payee_name, em=10)

    @admin.display(description="fee", ordering="fee")
    def fee_display(self, obj: Payout) -> str:
        return money(obj.fee, obj.currency)

    @admin.display(description="merchant", ordering="merchant__merchant_no")
    def merchant_text(self, obj: Payout) -> str:
        return str(obj.merchant)

    @admin.display(description="currency")
    def currency_text(self, obj: Payout) -> str:
        return obj.currency_id

    @admin.display(description="product")
    def product_text(self, obj: Payout) -> str:
        return obj.product.code

    @admin.display(description="channel")
    def channel_text(self, obj: Payout) -> str:
        return obj.channel.code

    @admin.display(description="reviewed by")
    def reviewed_by_text(self, obj: Payout) -> str:
        return payout_reviewed_by_label(obj)

    @admin.display(description="approvals")
    def approvals_display(self, obj: Payout) -> str:
        return f"{payout_approvals_count(obj)}/{obj.approvals_required}"

    @admin.display(description="created (UTC)", ordering="created_at")
    def created_utc(self, obj: Payout) -> str:
        return utc(obj.created_at)

    @admin.display(description="reviewed (UTC)")
    def reviewed_utc(self, obj: Payout) -> str:
        return utc(obj.reviewed_at)

    @admin.display(description="submitted (UTC)")
    def submitted_utc(self, obj: Payout) -> str:
        return utc(obj.submitted_at)

    @admin.display(description="finished (UTC)", ordering="finished_at")
    def finished_utc(self, obj: Payout) -> str:
        return utc(obj.finished_at)

    @admin.display(description="reversed (UTC)", ordering="reversed_at")
    def reversed_utc(self, obj: Payout) -> str:
        return utc(obj.reversed_at)

    @admin.display(description="reversal amount")
    def reversal_amount_display(self, obj: Payout) -> str:
        return money(obj.reversal_amount, obj.currency) if obj.reversal_amount is not None else "-"

    @admin.display(description="fee refund")
    def fee_refund_display(self, obj: Payout) -> str:
        return money(obj.fee_refund, obj.currency) if obj.fee_refund is not None else "-"

    @admin.display(description="payee account")
    def payee(self, obj: Payout) -> str:
        return obj.masked_payee_account

    @admin.display(description="risk reasons")
    def risk_reasons_display(self, obj: Payout) -> str:
        if not obj.risk_reasons:
            return "-"
        return format_html("<ul style='margin:0;padding-left:1em'>{}</ul>",
                           format_html_join("", "<li>{}</li>", ((reason,) for reason in obj.risk_reasons)))

    @admin.display(description="age", ordering="created_at")
    def age(self, obj: Payout) -> str:
        return short_age(obj.created_at)

    @admin.display(description="reasons")
    def reason_tags(self, obj: Payout) -> str:
        return format_html_join(" ", "<span class='risk-tag'>{}</span>",
                                ((tag,) for tag in payout_risk_tags(obj.risk_reasons)))

    @admin.display(description="decisions (audit trail)")
    def decision_history(self, obj: Payout) -> str:
        rows = payout_decisions(obj)
        if not rows:
            return "-"
        return format_html(
            "<table><thead><tr><th>when (UTC)</th><th>who</th><th>what</th><th>why</th><th>change</th></tr></thead>"
            "<tbody>{}</tbody></table>",
            format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} &rarr; {}</td></tr>", (
                (utc(row.created_at), row.actor_label, row.action, row.reason or "-",
                 row.old.get("status", "-") if row.old else "-", _change_summary(row.new, obj.currency))
                for row in rows)),
        )

    def has_add_permission(self, request):
        return False  # orders come from the merchant API only

    def has_delete_permission(self, request, obj=None):
        return False

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        extra_context = {**(extra_context or {}), "show_save": False, "show_save_and_continue": False,
                         "show_save_and_add_another": False, "show_delete": False}
        return super().changeform_view(request, object_id, form_url, extra_context)


def _row(payout: Payout) -> dict:
    return {"order": payout.platform_order_no, "merchant": payout.merchant.merchant_no
            if "merchant" in payout._state.fields_cache else payout.merchant_id,
            "amount": money(payout.amount, payout.currency), "status": payout_status_label(payout),
            "payee": payout.masked_payee_account, "bank": payout.bank_code, "created": utc(payout.created_at)}


MONEY_KEYS = {"amount", "fee", "reversal_amount", "fee_refund"}


def _change_summary(new: dict, currency=None) -> str:
    """The audit row's new values in words: money in major units, without the full payee account or the risk
    reasons (shown in full elsewhere on the page)."""
    parts = []
    for key, value in new.items():
        if key in ("payee_account", "risk_reasons"):
            continue
        if key in MONEY_KEYS and currency is not None and type(value) is int:
            value = money(value, currency)
        parts.append(f"{key}={value}")
    return ", ".join(parts) or "-"


def _action_page(model_admin, request, queryset, *, action: str, title: str, intro: str, form,
                 submit_label: str):
    """The intermediate page of an admin action that needs input (reject reason, reversal amounts)."""
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": title,
        "intro": intro,
        "form": form,
        "submit_label": submit_label,
        "action": action,
        "payouts": [{"payout": payout, "amount": money(payout.amount, payout.currency),
                     "status": payout_status_label(payout),
                     "fee": money(payout.fee, payout.currency),
                     "approvals": f"{payout.approvals.filter(decision='APPROVE').count()}/{payout.approvals_required}"}
                    for payout in queryset.select_related("merchant", "currency")],
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "is_nav_sidebar_enabled": False,  # the payouts' table needs the width
    }
    return TemplateResponse(request, "admin/payout/action_form.html", context)


@admin.register(PayoutReviewQueue)
class PayoutReviewQueueAdmin(PayoutDisplayMixin, admin.ModelAdmin):
    """FROZEN payouts, oldest first: what a risk reviewer works through."""

    # Fits 1280 px: short columns, reasons as tags, the full words on the decision page.
    list_display = ["order_short", "amount_display", "merchant_no", "payee_short", "bank", "reason_tags", "age",
                    "approvals_display"]
    list_display_links = ["order_short"]
    list_filter = []  # the filter column would cost 270 px; search covers order and merchant numbers
    search_fields = ["platform_order_no", "mch_order_no", "merchant__merchant_no"]
    ordering = ["created_at", "id"]
    actions = ["approve_selected", "reject_selected"]
    list_per_page = 50

    class Media:
        css = {"all": ["payout/review.css"]}

    @admin.display(description="payee")
    def payee_short(self, obj: Payout) -> str:
        return obj.masked_payee_account

    @admin.display(description="bank", ordering="bank_code")
    def bank(self, obj: Payout) -> str:
        return obj.bank_code

    def changelist_view(self, request, extra_context=None):
        # The page needs the whole width at 1280 px: no navigation sidebar here (the breadcrumbs lead back). The
        # title says what the list is, not Django's "Select payout in review to view"; its count line is
        # templates/admin/payout/payoutreviewqueue/pagination.html.
        return super().changelist_view(request, {**(extra_context or {}), "is_nav_sidebar_enabled": False,
                                                 "title": "Payouts waiting for a decision"})

    def get_urls(self):
        info = self.model._meta.app_label, self.model._meta.model_name
        urls = super().get_urls()  # the changelist first; before the catch-all "<path:object_id>/"
        return [urls[0], path("<int:payout_id>/decide/", self.admin_site.admin_view(self.decide_view),
                              name="%s_%s_decide" % info), *urls[1:]]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        return redirect(reverse("admin:payout_payoutreviewqueue_decide", args=[object_id]))

    def decide_view(self, request, payout_id: int):
        """One payout, everything a reviewer decides from, and the Approve and Reject buttons (each confirms and
        needs a reason). A POST calls the payout service, outside any admin transaction."""
        if not self.has_review_permission(request):
            raise PermissionDenied
        payout = get_object_or_404(Payout.objects.select_related("merchant", "currency", "product", "channel"),
                                   pk=payout_id)
        form = ReasonForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            decision = request.POST.get("decision")
            if decision in ("approve", "reject"):
                service, verb = (payout_approve, "approved") if decision == "approve" else (payout_reject, "rejected")
                self._decide(request, service, payout_id=payout.pk, verb=verb, reason=form.cleaned_data["reason"])
                return redirect(reverse("admin:payout_payoutreviewqueue_decide", args=[payout.pk]))
        balance = merchant_balances(merchant_id=payout.merchant_id, currency=payout.currency_id)
        approvals = list(payout.approvals.select_related("reviewer"))
        mine = next((a for a in approvals if a.reviewer_id == request.user.pk), None)
        approved_by = [a for a in approvals if a.decision == PayoutApproval.Decision.APPROVE]
        following = next_in_queue(payout, request.user)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Decide payout {payout.platform_order_no}",
            "payout": payout,
            "amount": money(payout.amount, payout.currency),
            "fee": money(payout.fee, payout.currency),
            "available": money(balance["available"], payout.currency),
            "frozen": money(balance["frozen"], payout.currency),
            "created": utc(payout.created_at),
            "age": short_age(payout.created_at),
            "approvals": approvals,
            "approvals_so_far": f"{sum(a.decision == PayoutApproval.Decision.APPROVE for a in approvals)}/"
                                f"{payout.approvals_required}",
            "payee_rows": [_row(p) for p in payee_history(payout)],
            "merchant_rows": [_row(p) for p in merchant_recent_payouts(payout)],
            "trail": [{"when": utc(r.created_at), "who": r.actor_label, "what": r.action, "why": r.reason or "-",
                       "change": _change_summary(r.new, payout.currency)} for r in payout_decisions(payout)],
            "form": form,
            "status": payout_status_label(payout),
            "reviewed_by": payout_reviewed_by_label(payout),
            # Who decided and when, above everything else once the payout has left review; while it waits for a
            # second approval, who gave the first.
            "deciders": [{"name": decider_name(a), "decision": a.get_decision_display().lower(),
                          "when": utc(a.created_at)} for a in (payout_deciders(payout) or approved_by)],
            "approvals_given": len(approved_by),
            # A reviewer who decided has nothing left to press (the service would refuse a second decision).
            "can_decide": payout.status == Payout.Status.FROZEN and mine is None,
            "my_decision": mine,
            "my_decision_at": utc(mine.created_at) if mine else "",
            "next_payout": following,
            "next_url": reverse("admin:payout_payoutreviewqueue_decide", args=[following.pk]) if following else "",
            "next_amount": money(following.amount, following.currency) if following else "",
            "is_nav_sidebar_enabled": False,
        }
        return TemplateResponse(request, "admin/payout/decide.html", context)

    def get_queryset(self, request):
        return super().get_queryset(request).filter(status=Payout.Status.FROZEN)

    def has_review_permission(self, request) -> bool:
        return request.user.has_perm(REVIEW_PERMISSION)

    def has_view_permission(self, request, obj=None):
        return self.has_review_permission(request)

    def has_change_permission(self, request, obj=None):
        return False

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    @admin.action(description="Approve selected payouts (asks for a reason)", permissions=["review"])
    def approve_selected(self, request, queryset):
        two = list(queryset.filter(approvals_required__gt=1).values_list("platform_order_no", flat=True))
        if two:
            # Four eyes: a payout that needs two approvals is decided on its own page, never by "select all".
            self.message_user(request, f"Not approved: {', '.join(two)} need two approvals; open each payout's "
                                       f"decision page. Nothing was approved.", messages.ERROR)
            return None
        form = ReasonForm(request.POST if "apply" in request.POST else None)
        if form.is_bound and form.is_valid():
            for payout_id in queryset.values_list("pk", flat=True):
                self._decide(request, payout_approve, payout_id=payout_id, verb="approved",
                             reason=form.cleaned_data["reason"])
            return None
        return _action_page(self, request, queryset.select_related("merchant", "currency"),
                            action="approve_selected", title="Approve payouts",
                            intro="Each payout is submitted to its channel after approval. Only payouts that need "
                                  "one approval can be approved together.",
                            form=form, submit_label="Approve")

    @admin.action(description="Reject selected payouts (asks for a reason)", permissions=["review"])
    def reject_selected(self, request, queryset):
        form = ReasonForm(request.POST if "apply" in request.POST else None)
        if form.is_bound and form.is_valid():
            for payout_id in queryset.values_list("pk", flat=True):
                self._decide(request, payout_reject, payout_id=payout_id, verb="rejected",
                             reason=form.cleaned_data["reason"])
            return None
        return _action_page(self, request, queryset.select_related("merchant", "currency"),
                            action="reject_selected", title="Reject payouts",
                            intro="The frozen amount and fee go back to the merchant's available balance and the "
                                  "merchant receives the REJECTED callback.",
                            form=form, submit_label="Reject")

    def _decide(self, request, service, *, payout_id: int, verb: str, **kwargs) -> None:
        """Calls the service and says what this call did (its `outcome`, decided under the row lock)."""
        try:
            payout = service(payout_id=payout_id, reviewer=request.user, **kwargs)
        except (PayoutActionRefused, PayoutNotFound, ServiceBusy) as exc:
            self.message_user(request, f"Refused: {getattr(exc, 'msg', None) or exc}", messages.ERROR)
            return
        if payout.outcome == DecisionOutcome.RECORDED:
            approvals = payout.approvals.filter(decision="APPROVE").count()
            self.message_user(request, f"Payout {payout}: your approval is recorded ({approvals}/"
                                       f"{payout.approvals_required}); a second reviewer must approve it.",
                              messages.SUCCESS)
            return
        if payout.outcome == DecisionOutcome.UNCHANGED:
            self.message_user(request, f"Payout {payout} was already {verb} (now {payout.status}), possibly by "
                                       f"another reviewer at the same moment; nothing changed.",
                              messages.WARNING)
            return
        self.message_user(request, f"Payout {payout} {verb}: now {payout.status}.", messages.SUCCESS)


@admin.register(Payout)
class PayoutAdmin(LagTolerantChangelistMixin, PayoutDisplayMixin, admin.ModelAdmin):
    """Every payout, read-only; operations may reverse a SUCCESS one."""

    # Fits 1280 px with the filter column: amount and status first after the order, long values cut
    # with the whole value in the tooltip; fee, review, finish and reversal times are on the payout's page (a
    # reversal shows in the status: "Success, reversed").
    list_display = ["order_short", "amount_display", "status_text", "merchant_no", "mch_order_short",
                    "payee_and_bank", "created_short"]
    list_display_links = ["order_short"]
    list_filter = ["status", "review_required", "currency", ("reversed_at", admin.EmptyFieldListFilter),
                   stranded_list_filter(STRANDED)]
    search_fields = ["platform_order_no", "mch_order_no", "merchant__merchant_no"]
    date_hierarchy = "created_at"
    actions = ["reverse_selected"]

    def has_change_permission(self, request, obj=None):
        return False

    def has_reverse_permission(self, request) -> bool:
        return request.user.has_perm(REVERSE_PERMISSION)

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    @admin.action(description="Reverse the selected SUCCESS payout (asks for amounts)", permissions=["reverse"])
    def reverse_selected(self, request, queryset):
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one payout to reverse.", messages.ERROR)
            return None
        payout = queryset.select_related("currency").get()
        if "apply" in request.POST:
            form = ReverseForm(request.POST, payout=payout)
            if form.is_valid():
                try:
                    staff_request = staff_request_create(
                        kind=StaffRequest.Kind.PAYOUT_REVERSAL, requested_by=request.user,
                        payload={"payout_id": payout.pk, "reversal_amount": form.cleaned_data["reversal_amount"],
                                 "fee_refund": form.cleaned_data["fee_refund"]},
                        reason=form.cleaned_data["reason"])
                except StaffRequestRefused as exc:
                    self.message_user(request, f"Refused: {exc}", messages.ERROR)
                else:
                    self.message_user(request, f"Reversal requested (request #{staff_request.pk}): it takes effect "
                                               f"when a second person with the reverse role approves it.",
                                      messages.SUCCESS)
                return None
        else:
            form = ReverseForm(initial={"reversal_amount": payout.amount, "fee_refund": payout.fee}, payout=payout)
        return _action_page(self, request, queryset, action="reverse_selected", title=f"Reverse payout {payout}",
                            intro=f"Amount {format_minor(payout.amount, payout.currency)}, fee "
                                  f"{format_minor(payout.fee, payout.currency)} (minor units: {payout.amount} and "
                                  f"{payout.fee}). This asks for the reversal: once a second person approves it, "
                                  f"it credits the merchant's available balance once and sends the payout.reversed "
                                  f"callback; the status stays SUCCESS.",
                            form=form, submit_label="Request reversal")


@admin.register(DenyListedAccount)
class DenyListedAccountAdmin(ProposeChangeAdminMixin, admin.ModelAdmin):
    """Payee accounts whose payouts always go to review (docs/api.md, "Payout orders"). Adding an entry is immediate;
    lifting or editing one is a request a second reviewer approves (four eyes, apps.common.setting_changes)."""

    staff_request_kind = StaffRequest.Kind.DENY_LIST_SETTING
    propose_additions = False

    list_display = ["masked_payee_account", "currency", "reason", "is_active", "created_by", "created_at"]
    list_filter = ["is_active", "currency"]
    fields = ["payee_account", "currency", "reason", "is_active"]

    def get_fields(self, request, obj=None):
        # The full number is typed once, when the entry is added; afterwards only the masked one is shown.
        return self.fields if obj is None else ["masked_payee_account", "currency", "reason", "is_active",
                                                "change_reason"]

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else ["masked_payee_account", "currency"]

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

    def has_delete_permission(self, request, obj=None):
        return False  # deactivate instead, so the history of why payouts were held stays readable
