"""Refunds in the portal (docs/portal.md, "Refunds"): thin views over apps.portal.refunds, and the lists of refunds
and refund requests (every query scoped to request.merchant)."""

import csv
from urllib.parse import urlencode

from django.contrib import messages
from django.db.models import Q
from django.http import Http404, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from apps.collection.models import CollectionOrder, Refund
from apps.collection.refunds import refunded_total
from apps.common.exports import csv_cell
from apps.common.step_up import SecondFactorRefused
from apps.currencies.selectors import currency_get
from apps.portal import refunds as services
from apps.portal import selectors
from apps.portal.access import has_permission, portal_view
from apps.portal.developer_views import CODE_WIDGET
from apps.portal.models import RefundRequest
from apps.portal.payout_views import major_to_minor
from apps.portal.recovery import recovery_cooling_refusal
from apps.portal.refunds import RefundRefused, RefundRequestNotFound

REFUND_STATUSES = [status.value for status in Refund.Status]
REQUEST_STATUSES = [status.value for status in RefundRequest.Status]
REFUND_COLUMNS = ["refund_no", "mch_refund_no", "platform_order_no", "mch_order_no", "created_at", "status",
                  "currency", "amount", "reason", "finished_at", "fail_reason", "asked_by", "approved_by"]


# --- on a pay-in's page -----------------------------------------------------------------------------------------


def payin_refunds(request, order: CollectionOrder) -> dict:
    """What a pay-in's page shows of its refunds: each refund (with who asked and approved it when it came from the
    portal), the requests still open, what is still refundable, and whether this person may ask."""
    refunds = list(Refund.objects.filter(merchant=request.merchant, order=order)
                   .select_related("portal_request__created_by", "portal_request__decided_by").order_by("created_at"))
    for refund in refunds:
        refund.asked = getattr(refund, "portal_request", None)
    open_requests = list(RefundRequest.objects.filter(merchant=request.merchant, order=order,
                                                      status__in=(RefundRequest.Status.PENDING,
                                                                  RefundRequest.Status.APPROVED))
                         .select_related("created_by").order_by("created_at"))
    paid = order.status == CollectionOrder.Status.SUCCESS
    refundable = order.amount - refunded_total(order_id=order.pk) if paid else 0
    return {"refunds": refunds, "open_requests": open_requests, "refundable": refundable, "refundable_shown": paid,
            "may_ask_refund": paid and refundable > 0 and has_permission(request.merchant_user, "request_refunds"),
            "waiting_total": sum(r.amount for r in open_requests if r.status == RefundRequest.Status.PENDING)}


@require_POST
@portal_view("request_refunds")
def refund_ask(request, platform_order_no: str):
    order = selectors.payin_get(merchant_id=request.merchant.pk, platform_order_no=platform_order_no)
    if order is None:
        raise Http404("no such pay-in")
    back = reverse("portal:payin", args=[order.platform_order_no])
    amount = major_to_minor(request.POST.get("amount", ""), currency_get(order.currency_id).minor_unit)
    if amount is None or amount <= 0:
        messages.error(request, f"Write the amount in {order.currency_id} as digits, e.g. 300.00, with at most "
                                f"{currency_get(order.currency_id).minor_unit} decimals. Nothing was asked for.")
        return redirect(back + "#refunds")
    try:
        refund_request = services.refund_request_create(actor=request.merchant_user, amount=amount,
                                                        platform_order_no=order.platform_order_no,
                                                        reason=request.POST.get("reason", ""))
    except RefundRefused as exc:
        messages.error(request, f"Not asked for: {_words(exc)}")
        return redirect(back + "#refunds")
    messages.success(request, f"Refund request #{refund_request.pk} is waiting for an owner's approval. Nothing is "
                              "refunded before that.")
    return redirect("portal:refund-request", request_id=refund_request.pk)


def _words(exc: RefundRefused) -> str:
    """A refusal in words for the page: the contract's code with what it means here."""
    meaning = {"2007": "this pay-in cannot be refunded", "2008": "more than is still refundable",
               "2003": "your available balance does not cover it"}.get(exc.code)
    return f"{meaning} ({exc}). Nothing changed." if meaning else f"{exc} Nothing changed."


# --- one request ----------------------------------------------------------------------------------------------------


def _request(request, request_id: int) -> RefundRequest:
    found = (RefundRequest.objects.select_related("created_by", "decided_by", "order", "refund")
             .filter(pk=request_id, merchant=request.merchant).first())  # another merchant's: not found
    if found is None:
        raise Http404
    return found


@portal_view("view_orders")
def request_detail(request, request_id: int):
    refund_request = _request(request, request_id)
    person = request.merchant_user
    pending = refund_request.status == RefundRequest.Status.PENDING
    may_decide = pending and has_permission(person, "approve_refunds")
    is_maker = refund_request.created_by_id == request.user.pk
    order = refund_request.order
    refundable = order.amount - refunded_total(order_id=order.pk)
    return render(request, "portal/refund_request.html", {
        "title": f"Refund request #{refund_request.pk}", "rr": refund_request, "order": order,
        "refundable": refundable, "may_decide": may_decide, "is_maker": is_maker,
        "may_withdraw": pending and is_maker,
        "checker_problem": services.refund_checker_problem(actor=person, request=refund_request)
        if may_decide and not is_maker else "",
        "no_checker": pending and not selectors.independent_owners(merchant_id=request.merchant.pk,
                                                                   of_user=refund_request.created_by),
        "cooling": may_decide and recovery_cooling_refusal(user_id=request.user.pk, doing="approve refunds"),
        "too_much": pending and refund_request.amount > refundable,
        "code_widget": CODE_WIDGET.render("code", "", attrs={"id": "id_code", "class": "code-input", "required": True}),
    })


@sensitive_post_parameters("code")
@require_POST
@portal_view("approve_refunds")
def request_approve(request, request_id: int):
    refund_request = _request(request, request_id)
    try:
        done = services.refund_request_approve(actor=request.merchant_user, request_id=refund_request.pk,
                                               otp_code=request.POST.get("code", ""))
    except RefundRefused as exc:
        messages.error(request, f"Not approved: {_words(exc)}")
    except SecondFactorRefused as exc:
        messages.error(request, str(exc))
    except RefundRequestNotFound:
        raise Http404 from None
    else:
        if done.status == RefundRequest.Status.DONE:
            messages.success(request, f"Approved: refund {done.refund.refund_no} is on its way to the payer.")
        elif done.status == RefundRequest.Status.FAILED:
            messages.error(request, f"Approved, but the refund was refused: {done.error_code} {done.error_msg} "
                                    "Nothing was refunded.")
        else:
            messages.success(request, "Approved: the refund is being made.")
    return redirect("portal:refund-request", request_id=refund_request.pk)


@require_POST
@portal_view("approve_refunds")
def request_reject(request, request_id: int):
    refund_request = _request(request, request_id)
    try:
        services.refund_request_reject(actor=request.merchant_user, request_id=refund_request.pk,
                                       reason=request.POST.get("reason", ""))
    except RefundRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Refund request #{refund_request.pk} rejected; nothing was refunded.")
    return redirect("portal:refund-request", request_id=refund_request.pk)


@require_POST
@portal_view("request_refunds")
def request_withdraw(request, request_id: int):
    refund_request = _request(request, request_id)
    try:
        services.refund_request_withdraw(actor=request.merchant_user, request_id=refund_request.pk)
    except RefundRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Refund request #{refund_request.pk} withdrawn; nothing was refunded.")
    return redirect("portal:refund-request", request_id=refund_request.pk)


# --- lists ----------------------------------------------------------------------------------------------------------


def _refunds(request):
    currencies = selectors.merchant_currencies(merchant_id=request.merchant.pk)
    flt = selectors.parse_filter(request.GET, statuses=REFUND_STATUSES, currencies=currencies)
    refunds = Refund.objects.filter(merchant=request.merchant).select_related(
        "order", "portal_request__created_by", "portal_request__decided_by")
    return selectors.filtered(refunds, request.merchant.pk, flt, numbers=refund_numbers), flt, currencies


def refund_numbers(number: str) -> Q:
    """A refund found by either of its numbers or either number of its pay-in, exactly."""
    return (Q(refund_no=number) | Q(mch_refund_no=number) | Q(order__platform_order_no=number)
            | Q(order__mch_order_no=number))


@portal_view("view_orders")
def refund_list(request):
    refunds, flt, currencies = _refunds(request)
    rows, next_cursor = selectors.page(refunds, cursor=request.GET.get("after", ""))
    return render(request, "portal/refunds.html", {
        "title": "Refunds", "rows": rows, "flt": flt, "currencies": currencies, "statuses": REFUND_STATUSES,
        "next_cursor": next_cursor, "query": flt.query_string(), "first_page": not request.GET.get("after"),
        "number_label": "Refund or order number", "number_hint": "a refund's number or its pay-in's",
        "export_url": reverse("portal:refunds-export"),
    })


class _Echo:
    def write(self, value):
        return value


def _csv_row(refund: Refund) -> list[str]:
    stamp = lambda moment: moment.isoformat() if moment else ""  # noqa: E731
    asked = getattr(refund, "portal_request", None)
    values = [refund.refund_no, refund.mch_refund_no, refund.order.platform_order_no, refund.order.mch_order_no,
              stamp(refund.created_at), refund.status, refund.currency_id, refund.amount, refund.reason,
              stamp(refund.finished_at), refund.fail_reason,
              asked.created_by.get_username() if asked else "API",
              asked.decided_by.get_username() if asked and asked.decided_by_id else ""]
    return [csv_cell(value) for value in values]  # reasons and order numbers are anyone's text


@portal_view("export_orders")
def refund_export(request):
    """The filtered list as CSV (amounts in minor units, times ISO 8601 UTC), streamed, as the order exports."""
    refunds, _, _ = _refunds(request)
    writer = csv.writer(_Echo())

    def lines():
        yield writer.writerow(REFUND_COLUMNS)
        for count, refund in enumerate(refunds.iterator(chunk_size=2000)):
            if count == selectors.EXPORT_MAX_ROWS:
                yield writer.writerow([f"# cut at {selectors.EXPORT_MAX_ROWS} rows: narrow the filter"])
                return
            yield writer.writerow(_csv_row(refund))

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="refunds-{request.merchant.merchant_no}-{stamp}.csv"'
    return response


@portal_view("view_orders")
def request_list(request):
    requests = (RefundRequest.objects.filter(merchant=request.merchant)
                .select_related("order", "created_by", "decided_by", "refund"))
    status = request.GET.get("status", "").strip().upper()
    if status in REQUEST_STATUSES:
        requests = requests.filter(status=status)
    number = request.GET.get("q", "").strip()[:64]
    if number:
        requests = requests.filter(Q(mch_refund_no=number) | Q(order__platform_order_no=number)
                                   | Q(order__mch_order_no=number) | Q(refund__refund_no=number))
    rows, next_cursor = selectors.page(requests.order_by("-created_at", "-id"), cursor=request.GET.get("after", ""))
    query = urlencode({key: value for key, value in (("status", status if status in REQUEST_STATUSES else ""),
                                                     ("q", number)) if value})
    return render(request, "portal/refund_requests.html", {
        "title": "Refund requests", "rows": rows, "status": status, "statuses": RefundRequest.Status.choices,
        "number": number, "next_cursor": next_cursor, "query": query, "first_page": not request.GET.get("after"),
        "no_export": True})


def waiting_refunds(merchant_user) -> dict | None:
    """Home's "Waiting for you": for an owner, the refund requests another person asked for that they may approve."""
    if not has_permission(merchant_user, "approve_refunds"):
        return None
    waiting = (RefundRequest.objects.filter(merchant_id=merchant_user.merchant_id, status=RefundRequest.Status.PENDING)
               .exclude(created_by_id=merchant_user.user_id).select_related("created_by"))
    verdicts: dict[int, bool] = {}  # one independence check per maker, not per request
    for waiting_request in waiting:
        if waiting_request.created_by_id not in verdicts:
            verdicts[waiting_request.created_by_id] = not services.refund_checker_problem(actor=merchant_user,
                                                                                          request=waiting_request)
    count = sum(verdicts[waiting_request.created_by_id] for waiting_request in waiting)
    if not count:
        return None
    return {"label": "Refunds waiting for your approval", "count": count,
            "url": reverse("portal:refund-requests") + "?status=PENDING"}


if waiting_refunds not in selectors.WAITING_SECTIONS:
    selectors.WAITING_SECTIONS.append(waiting_refunds)
