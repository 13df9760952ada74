"""The hosted pay page at pay_url (docs/api.md, "Endpoints", "Sandbox channel"). HTML only; 404s are HTML pages too."""

import logging
from functools import wraps

from django.http import HttpResponseRedirect
from django.middleware.csrf import CsrfViewMiddleware
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.decorators import decorator_from_middleware
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from apps.channels.base import UpstreamRejected, UpstreamUnavailable
from apps.channels.environment import SANDBOX, ChannelNotAllowed, platform_environment
from apps.channels.registry import payin_adapter
from apps.collection.failover import collection_payment_start
from apps.collection.models import CollectionOrder
from apps.collection.presentation import format_duration
from apps.currencies.formatting import format_minor
from apps.collection.selectors import collection_order_by_pay_token
from apps.collection.services import SandboxPay, collection_sandbox_pay
from apps.common.retry import ServiceBusy

logger = logging.getLogger(__name__)

SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; "
                                "object-src 'none'"),
    "X-Frame-Options": "DENY",
    # The pay token is in the URL: it must never travel in a Referer header.
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    "X-Robots-Tag": "noindex, nofollow",
}


class _HostedPageCsrf(CsrfViewMiddleware):
    """Django's CSRF check, except that `Origin: null` is accepted: under Referrer-Policy: no-referrer browsers
    send exactly that on the page's own form posts (Fetch spec). The CSRF token must still match."""

    def _origin_verified(self, request):
        return request.META.get("HTTP_ORIGIN") == "null" or super()._origin_verified(request)


_hosted_csrf_protect = decorator_from_middleware(_HostedPageCsrf)


def hosted_page(view):
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        for header, value in SECURITY_HEADERS.items():
            response[header] = value
        return response

    return csrf_exempt(wrapper)


def _context(order: CollectionOrder, **extra) -> dict:
    now = timezone.now()
    return {
        "order": order,
        "merchant_name": order.merchant.name,
        "amount_display": format_minor(order.amount, order.currency),
        "seconds_left": max(0, int((order.expire_at - now).total_seconds())),
        "time_left": format_duration((order.expire_at - now).total_seconds()),
        "expire_at_unix": int(order.expire_at.timestamp()),
        # A sandbox deployment says so on every page it shows a payer (docs/channels.md).
        "sandbox_deployment": platform_environment() == SANDBOX,
        **extra,
    }


def _page_for(request, order: CollectionOrder, *, failed: bool = False, status: int = 200):
    if order.status == CollectionOrder.Status.SUCCESS:
        return render(request, "collection/paid.html", _context(order), status=status)
    if not order.is_payable():
        return render(request, "collection/expired.html", _context(order), status=status)
    try:
        order, start = collection_payment_start(order=order)  # the next channel while none is open yet
        adapter = payin_adapter(order.channel)
    except (ChannelNotAllowed, UpstreamUnavailable, UpstreamRejected) as exc:
        # No payment can be opened now (upstream down, or a channel this deployment may not use): say so, move nothing.
        logger.warning("pay page of %s: no upstream payment: %s", order, exc)
        return render(request, "collection/pay.html", _context(order, unavailable=True), status=503)
    if not getattr(adapter, "is_sandbox", False) and start.redirect_url and request.method == "GET" and status == 200:
        return redirect(start.redirect_url)  # docs/api.md, "Endpoints": the payer is forwarded upstream from here
    return render(request, "collection/pay.html", _context(
        order, sandbox=getattr(adapter, "is_sandbox", False), redirect_url=start.redirect_url, failed=failed,
    ), status=status)


@hosted_page
@require_http_methods(["GET", "HEAD", "POST"])
@_hosted_csrf_protect
def pay_page(request, pay_token: str):
    if request.method == "POST" and request.POST.get("action") == "pay":
        return _pay(request, pay_token)
    order = collection_order_by_pay_token(pay_token=pay_token)
    if order is None:
        return _not_found(request)
    if request.method != "POST":
        return _page_for(request, order, failed=request.GET.get("result") == "failed")

    action = request.POST.get("action")
    try:
        adapter = payin_adapter(order.channel)
    except ChannelNotAllowed:
        return _page_for(request, order, status=400)  # a sandbox order in a live deployment takes no "payment"
    if not getattr(adapter, "is_sandbox", False) or action != "fail":  # "pay" is _pay's
        return _page_for(request, order, status=400)
    if order.status == CollectionOrder.Status.SUCCESS:
        return HttpResponseRedirect(request.path)
    if not order.is_payable():
        # An expired link takes no payment, even if the expiry task has not run yet (docs/api.md, "Collection orders").
        return _page_for(request, order, status=409)
    adapter.simulate_failed(order=order)
    return HttpResponseRedirect(f"{request.path}?result=failed")


def _pay(request, pay_token: str):
    """The sandbox Pay: the order is read once, locked, and paid under that lock (collection_sandbox_pay)."""
    try:
        order, outcome = collection_sandbox_pay(pay_token=pay_token)
    except ServiceBusy:
        # Another press of Pay (or the upstream's notice) held the order past every retry: nothing was done
        # here; the page shows what the order is now, paid by that other request or payable again.
        logger.warning("pay page: busy, answered with the order's current page")
        return HttpResponseRedirect(request.path)
    if order is None:
        return _not_found(request)
    if outcome == SandboxPay.REFUSED:
        return _page_for(request, order, status=400)
    if outcome == SandboxPay.NOT_PAYABLE:
        # An expired link takes no payment, even if the expiry task has not run yet (docs/api.md, "Collection orders").
        return _page_for(request, order, status=409)
    # The page's own path, not `redirect()`: that first tries the path as a URL name (`reverse`, which fails here).
    return HttpResponseRedirect(request.path)


def _not_found(request):
    return render(request, "collection/not_found.html", {"sandbox_deployment": platform_environment() == SANDBOX},
                  status=404)
