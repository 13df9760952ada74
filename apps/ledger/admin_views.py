"""The balance adjustment's request page in the admin (four eyes, docs/back-office.md): the staff request list's
"Add" opens it (apps.common.admin.StaffRequestAdmin, through the kind's registered request page); a second person
approves the request before anything is posted (apps.ledger.staff_requests)."""

from django import forms
from django.contrib import messages
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse

from apps.common.amounts import MAX_AMOUNT
from apps.common.models import StaffRequest
from apps.common.staff_requests import StaffRequestRefused, staff_request_create
from apps.currencies.models import Currency


class BalanceAdjustmentRequestForm(forms.Form):
    merchant_no = forms.CharField(max_length=32)
    currency = forms.CharField(max_length=3)
    amount = forms.IntegerField(min_value=-MAX_AMOUNT, max_value=MAX_AMOUNT,
                                help_text="Minor units; negative to debit. Not zero.")
    reason = forms.CharField(max_length=255, help_text="Why (ticket, correction...). Kept in the audit trail.")

    def clean_currency(self):
        return self.cleaned_data["currency"].strip().upper()


def balance_adjustment_request_page(request, context: dict):
    """Ask for a credit or debit of a merchant's available balance; `context` is the admin's (site, opts)."""
    form = BalanceAdjustmentRequestForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            created = staff_request_create(
                kind=StaffRequest.Kind.BALANCE_ADJUSTMENT, requested_by=request.user, reason=data["reason"],
                payload={"merchant_no": data["merchant_no"], "currency": data["currency"], "amount": data["amount"]})
        except (ValueError, LookupError, KeyError) as exc:
            form.add_error(None, str(exc) if isinstance(exc, StaffRequestRefused) else f"Refused: {exc}")
        else:
            messages.success(request, f"Balance adjustment requested (request #{created.pk}): it takes effect when a "
                                      f"second person approves it.")
            return redirect(reverse("admin:common_staffrequest_changelist"))
    return TemplateResponse(request, "admin/ledger/balance_adjustment_request.html", {
        **context, "form": form,
        "title": "Ask for a balance adjustment", "submit_label": "Request adjustment",
        "intro": "A credit (or debit) of a merchant's available balance, as a ledger posting. It takes effect only "
                 "when a second person approves it.",
        # The amount's live preview in major units (the template's script): each currency's scale and symbol.
        "currencies": {c.code: {"code": c.code, "symbol": c.symbol, "minor_unit": c.minor_unit}
                       for c in Currency.objects.order_by("code")},
    })
