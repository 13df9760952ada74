"""Payouts by hand (docs/portal.md, "Payouts by hand"): thin views over apps.payout_batches.services."""

import re
from collections import Counter
from dataclasses import dataclass

from django import forms
from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from apps.common.step_up import SecondFactorRefused
from apps.currencies.selectors import currency_get
from apps.ledger.selectors import merchant_balances
from apps.payout_batches import services
from apps.payout_batches.models import PayoutBatch
from apps.payout_batches.services import BatchInvalid, BatchNotFound, BatchRefused
from apps.merchants.models import MerchantProduct, Product
from apps.payout.models import Payout
from apps.portal import selectors as portal_selectors
from apps.portal.access import has_permission, portal_view
from apps.portal.developer_views import CODE_WIDGET
from apps.portal.recovery import recovery_cooling_refusal

PAGE = 50
# An approval creates up to this many payouts in its own request (the person sees every row's result at once); a
# larger batch is handed to a Celery task (measured: ~35-120 ms a payout on the 2-core test host under load, so 500
# rows would hold a web worker for up to a minute). The beat's sweep backs both up.
INLINE_ROWS = 50


def _payout_products(merchant) -> list[Product]:
    return [link.product for link in MerchantProduct.objects.select_related("product").filter(
        merchant=merchant, is_enabled=True, product__is_active=True, product__kind=Product.Kind.PAYOUT)
        .order_by("product__code")]


def major_to_minor(text: str, minor_unit: int) -> int | None:
    """'1,250.50' → 125050 for a currency of 2 decimals; exact (integers only), None when it is not an amount."""
    text = (text or "").replace(",", "").strip()
    match = re.fullmatch(r"([0-9]{1,15})(?:\.([0-9]{1,%d}))?" % max(minor_unit, 1), text)
    if not match or (match.group(2) and minor_unit == 0):
        return None
    return int(match.group(1)) * 10**minor_unit + int((match.group(2) or "").ljust(minor_unit, "0") or 0)


class SinglePayoutForm(forms.Form):
    mch_order_no = forms.CharField(max_length=64, label="Your order number (mch_order_no)")
    product_code = forms.ChoiceField(label="Product")
    amount = forms.CharField(max_length=24, label="Amount", help_text="In the currency's units, e.g. 1,250.50")
    payee_name = forms.CharField(max_length=128, label="Payee name")
    payee_account = forms.CharField(max_length=64, label="Payee account")
    bank_code = forms.CharField(max_length=32, label="Bank code", help_text="e.g. BDO, BPI, GCASH")
    attach = forms.CharField(max_length=512, required=False, label="Attach (optional)")
    note = forms.CharField(max_length=255, required=False, label="Note for the approver")

    def __init__(self, *args, products: list[Product], **kwargs):
        super().__init__(*args, **kwargs)
        self.products = {product.code: product for product in products}
        self.fields["product_code"].choices = [(p.code, f"{p.code} ({p.currency_id})") for p in products]

    def clean(self):
        cleaned = super().clean()
        product = self.products.get(cleaned.get("product_code"))
        if product is not None and "amount" in cleaned:
            minor = major_to_minor(cleaned["amount"], currency_get(product.currency_id).minor_unit)
            if minor is None:
                self.add_error("amount", "Write the amount as digits, with at most "
                                         f"{currency_get(product.currency_id).minor_unit} decimals.")
            else:
                cleaned["amount_minor"], cleaned["currency"] = minor, product.currency_id
        return cleaned


class BatchUploadForm(forms.Form):
    file = forms.FileField(label="CSV file")
    note = forms.CharField(max_length=255, required=False, label="Note for the approver")

    def __init__(self, *args, **kwargs):
        # Shown on one page with SinglePayoutForm, which has a `note` too: ids of its own (the names stay).
        super().__init__(*args, auto_id="id_upload_%s", **kwargs)


@dataclass
class Total:
    currency: str
    count: int
    amount: int
    fee: int
    available: int

    @property
    def needed(self) -> int:
        return self.amount + self.fee

    @property
    def short(self) -> bool:
        return self.needed > self.available


def _totals(merchant, rows) -> list[Total]:
    """Per currency: the rows' amounts, their fees as the products price them now, and what is available now."""
    products = {p.code: p for p in Product.objects.filter(code__in={row.product_code for row in rows})}
    totals: dict[str, Total] = {}
    for row in rows:
        total = totals.get(row.currency) or totals.setdefault(row.currency, Total(
            row.currency, 0, 0, 0, merchant_balances(merchant_id=merchant.pk, currency=row.currency)["available"]))
        total.count += 1
        total.amount += row.amount
        product = products.get(row.product_code)
        total.fee += product.fee_for(row.amount) if product else 0
    return list(totals.values())


@sensitive_post_parameters("payee_account")
@portal_view("create_payouts")
def payout_new(request):
    merchant = request.merchant
    products = _payout_products(merchant)
    single = SinglePayoutForm(products=products)
    upload = BatchUploadForm()
    invalid: BatchInvalid | None = None
    if request.method == "POST":
        try:
            if request.POST.get("action") == "upload":
                upload = BatchUploadForm(request.POST, request.FILES)
                if upload.is_valid():
                    file = upload.cleaned_data["file"]
                    data = file.read(services.MAX_FILE_BYTES + 1)
                    created = services.payout_batch_from_csv(actor=request.merchant_user, file_name=file.name,
                                                             data=data, note=upload.cleaned_data["note"])
                    return _created(request, created)
            else:
                single = SinglePayoutForm(request.POST, products=products)
                if single.is_valid():
                    data = single.cleaned_data
                    values = {name: data.get(name, "") for name in services.FIELDS}
                    values.update(amount=str(data["amount_minor"]), currency=data["currency"])
                    created = services.payout_batch_single(actor=request.merchant_user, values=values,
                                                           note=data["note"])
                    return _created(request, created)
        except BatchInvalid as exc:
            invalid = exc
        except BatchRefused as exc:
            messages.error(request, str(exc))
    return render(request, "portal/payout_new.html", {
        "title": "Send payouts", "single": single, "upload": upload, "invalid": invalid,
        "columns": services.COLUMNS, "optional_columns": services.OPTIONAL_COLUMNS, "max_rows": services.MAX_ROWS,
        "products": products}, status=400 if invalid else 200)


def _created(request, created: services.BatchCreated):
    batch = created.batch
    if created.replayed:
        messages.warning(request, f"This was asked for already: batch #{batch.pk} "
                                  f"({batch.get_status_display().lower()}). Nothing new was created.")
    else:
        messages.success(request, f"Batch #{batch.pk} ({batch.row_count} payout{'s' if batch.row_count != 1 else ''}) "
                                  "is waiting for an owner's approval. Nothing is paid before that.")
    return redirect("portal:payout-batch", batch_id=batch.pk)


@portal_view("create_payouts")
def batch_list(request):
    batches = PayoutBatch.objects.filter(merchant=request.merchant).select_related("created_by", "decided_by")
    status = request.GET.get("status", "")
    if status in PayoutBatch.Status.values:
        batches = batches.filter(status=status)
    before = request.GET.get("before", "")
    if before.isdigit():
        batches = batches.filter(pk__lt=int(before))
    page = list(batches.order_by("-pk")[:PAGE + 1])
    older = page[PAGE - 1].pk if len(page) > PAGE else None
    return render(request, "portal/payout_batches.html", {
        "title": "Payout batches", "batches": page[:PAGE], "status": status, "statuses": PayoutBatch.Status.choices,
        "older": older})


def _batch(request, batch_id: int) -> PayoutBatch:
    batch = (PayoutBatch.objects.select_related("created_by", "decided_by")
             .filter(pk=batch_id, merchant=request.merchant).first())  # another merchant's batch: not found
    if batch is None:
        raise Http404
    return batch


BATCH_FOLLOW_SECONDS = 10  # the batch page reloads itself this often while its payouts are being created or sent


@portal_view("create_payouts")
def batch_detail(request, batch_id: int):
    batch = _batch(request, batch_id)
    rows = list(batch.rows.select_related("payout").order_by("line"))
    checks = {}
    if batch.status == PayoutBatch.Status.PENDING:
        # What payout_create would say now (a product switched off, a bank code retired since the upload).
        values = [(row.line, {name: str(getattr(row, name)) for name in services.FIELDS}) for row in rows]
        checks = {check.line: check for check in services.rows_check(merchant=request.merchant, rows=values,
                                                                     batch=batch)}
    for row in rows:
        row.check = checks.get(row.line)
    pending = batch.status == PayoutBatch.Status.PENDING
    may_decide = pending and has_permission(request.merchant_user, "approve_payouts")
    is_maker = batch.created_by_id == request.user.pk
    # A batch is done when its payouts exist; they then go on to the bank on their own. While one is on its way the
    # page says so and refreshes itself, so "done" never sits beside an approved payout shown as of its approval.
    on_their_way = sum(row.payout is not None and row.payout.status not in Payout.TERMINAL for row in rows)
    sending = any(row.payout is not None and row.payout.status in (Payout.Status.APPROVED, Payout.Status.PROCESSING)
                  for row in rows)
    return render(request, "portal/payout_batch.html", {
        "on_their_way": on_their_way, "follow_seconds": BATCH_FOLLOW_SECONDS
        if batch.status == PayoutBatch.Status.APPROVED or sending else 0,
        "title": f"Payout batch #{batch.pk}", "batch": batch, "rows": rows, "totals": _totals(request.merchant, rows),
        "may_decide": may_decide, "is_maker": is_maker,
        "checker_problem": services.batch_checker_problem(actor=request.merchant_user, batch=batch)
        if may_decide and not is_maker else "",
        "no_checker": pending and not portal_selectors.independent_owners(merchant_id=request.merchant.pk,
                                                                          of_user=batch.created_by),
        "cooling": may_decide and recovery_cooling_refusal(user_id=request.user.pk, doing="approve payouts"),
        "code_widget": CODE_WIDGET.render("code", "", attrs={"id": "id_code", "class": "code-input", "required": True}),
        "counts": {status: sum(row.status == status for row in rows) for status in ("PENDING", "CREATED", "FAILED")},
    })


@sensitive_post_parameters("code")
@require_POST
@portal_view("approve_payouts")
def batch_approve(request, batch_id: int):
    batch = _batch(request, batch_id)
    try:
        services.payout_batch_approve(actor=request.merchant_user, batch_id=batch.pk,
                                      otp_code=request.POST.get("code", ""))
    except (BatchRefused, SecondFactorRefused) as exc:
        messages.error(request, str(exc))
        return redirect("portal:payout-batch", batch_id=batch.pk)
    except BatchNotFound:
        raise Http404 from None
    if batch.row_count > INLINE_ROWS:
        _dispatch(batch.pk)
        messages.success(request, f"Approved: the {batch.row_count} payouts are being created, one by one. Reload "
                                  "this page to see each row's result.")
        return redirect("portal:payout-batch", batch_id=batch.pk)
    # Created now, one by one (each in payout_create's own transaction); a request lost half-way is finished by the
    # sweep (apps.payout_batches.tasks.resume_payout_batches).
    batch = services.payout_batch_process(batch_id=batch.pk)
    created = batch.rows.filter(status="CREATED").count()
    failed = batch.rows.filter(status="FAILED").count()
    (messages.success if not failed else messages.warning)(
        request, f"Approved: {created} payout{'s' if created != 1 else ''} created"
                 + (f", {failed} not created (see each row)" if failed else "") + ".")
    return redirect("portal:payout-batch", batch_id=batch.pk)


def _dispatch(batch_id: int) -> None:
    """Queue the batch's processing; a broker outage is logged, not raised: the sweep picks the batch up."""
    import logging

    from apps.payout_batches.tasks import process_payout_batch

    try:
        process_payout_batch.delay(batch_id)
    except Exception as exc:  # noqa: BLE001 - broker down: the batch stays APPROVED and the sweep resumes it
        logging.getLogger(__name__).warning("payout batch %s not dispatched (%s); the sweep will process it",
                                            batch_id, type(exc).__name__)


@require_POST
@portal_view("approve_payouts")
def batch_reject(request, batch_id: int):
    batch = _batch(request, batch_id)
    try:
        services.payout_batch_reject(actor=request.merchant_user, batch_id=batch.pk,
                                     reason=request.POST.get("reason", ""))
    except BatchRefused as exc:
        messages.error(request, str(exc))
    except BatchNotFound:
        raise Http404 from None
    else:
        messages.success(request, f"Batch #{batch.pk} rejected; nothing was paid.")
    return redirect("portal:payout-batch", batch_id=batch.pk)


def waiting_batches(merchant_user) -> dict | None:
    """Home's "Waiting for you": for an owner, the batches another person asked for and no one decided yet."""
    if not has_permission(merchant_user, "approve_payouts"):
        return None
    makers = (PayoutBatch.objects.filter(merchant_id=merchant_user.merchant_id, status=PayoutBatch.Status.PENDING)
              .exclude(created_by_id=merchant_user.user_id).values_list("created_by_id", flat=True))
    count = 0
    for maker_id, batches in Counter(makers).items():  # only what this owner may approve (independence)
        maker = PayoutBatch(created_by_id=maker_id, merchant_id=merchant_user.merchant_id)
        count += batches if not services.batch_checker_problem(actor=merchant_user, batch=maker) else 0
    if not count:
        return None
    return {"label": "Payout batches waiting for your approval", "count": count,
            "url": reverse("portal:payout-batches") + "?status=PENDING"}


if waiting_batches not in portal_selectors.WAITING_SECTIONS:
    portal_selectors.WAITING_SECTIONS.append(waiting_batches)
