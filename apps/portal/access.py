"""Who may do what in the portal (docs/portal.md, "Roles"), and the one way a page gets its merchant.

Every portal view is wrapped by `portal_view("<permission>")` (or is a `PortalView` with `permission = ...`): it
refuses anyone who is not a signed-in merchant user with a verified second factor (to the sign-in page), or whose role
lacks the permission (403), then sets `request.merchant_user` and `request.merchant`. Views query through
`request.merchant` only (selectors take `merchant_id`), so another merchant's order is simply not found (404).
"""

from functools import wraps

from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.cache import never_cache

from apps.ledger.statements import settlement_zone
from apps.portal.models import MerchantUser, Role

OWNER, FINANCE, DEVELOPER, VIEWER = Role.OWNER, Role.FINANCE, Role.DEVELOPER, Role.VIEWER
EVERYONE = frozenset(Role)

# permission -> the roles that have it. A new page names one permission (add it here, and to docs/portal.md).
PERMISSIONS: dict[str, frozenset[str]] = {
    "view_home": EVERYONE,                                   # balances, today's figures
    "view_orders": EVERYONE,                                 # pay-ins, payouts, an order's page and callbacks
    "export_orders": frozenset({OWNER, FINANCE}),            # CSV of a filtered list
    "resend_callbacks": frozenset({OWNER, FINANCE, DEVELOPER}),
    "view_statements": frozenset({OWNER, FINANCE}),
    "see_payee_accounts": frozenset({OWNER, FINANCE}),       # the full payee account on an order's page
    "manage_team": frozenset({OWNER}),                       # invite people, change roles, deactivate
    # the developers page, payouts by hand:
    "view_developers": frozenset({OWNER, DEVELOPER}),
    "manage_keys": frozenset({OWNER}),                       # with the second factor asked again
    "manage_callback_urls": frozenset({OWNER}),              # with the second factor asked again
    "send_test_callback": frozenset({OWNER, DEVELOPER}),
    "create_payouts": frozenset({OWNER, FINANCE}),
    "approve_payouts": frozenset({OWNER}),
    "request_refunds": frozenset({OWNER, FINANCE}),         # ask for a refund of a paid pay-in
    "approve_refunds": frozenset({OWNER}),                   # with the second factor asked again
}

# Security headers of every portal page (the same policy as the pay page: nothing from another host, no inline
# script or style, never framed).
SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; "
                                "object-src 'none'"),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    "X-Robots-Tag": "noindex, nofollow",
}


def secure(response):
    for header, value in SECURITY_HEADERS.items():
        response.headers.setdefault(header, value)
    return response


def merchant_time(view):
    """Every time the view renders is Manila time (SETTLEMENT_TIME_ZONE), the day merchants, settlement and statements
    count in; the footer says so once (docs/portal.md, "Pages"). CSV exports keep ISO 8601 UTC with its offset."""
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        with timezone.override(settlement_zone()):
            return view(request, *args, **kwargs)

    return wrapped


def merchant_user_of(user) -> MerchantUser | None:
    """The active merchant user behind a Django user, or None (staff, or anyone without one, or deactivated)."""
    if not user.is_authenticated or not user.is_active or user.is_staff or user.is_superuser:
        return None
    merchant_user = MerchantUser.objects.select_related("merchant").filter(user=user, is_active=True).first()
    return merchant_user


def has_permission(merchant_user: MerchantUser | None, permission: str) -> bool:
    return merchant_user is not None and merchant_user.role in PERMISSIONS[permission]


def portal_view(permission: str):
    """Decorator of a portal view function: a signed-in merchant user (second factor verified in this session) whose
    role has `permission`; sets request.merchant_user and request.merchant."""
    if permission not in PERMISSIONS:
        raise ValueError(f"unknown portal permission {permission!r}")

    def decorator(view):
        @wraps(view)
        @never_cache
        @merchant_time
        def wrapped(request, *args, **kwargs):
            merchant_user = merchant_user_of(request.user)
            if merchant_user is None or not request.user.is_verified():
                return secure(redirect(f"{_signin_url()}?next={request.path}"))
            request.merchant_user = merchant_user
            request.merchant = merchant_user.merchant
            if merchant_user.role not in PERMISSIONS[permission]:
                return secure(render(request, "portal/forbidden.html", {"permission": permission}, status=403))
            return secure(view(request, *args, **kwargs))

        wrapped.portal_permission = permission
        return wrapped

    return decorator


class PortalView(View):
    """Class-based form of portal_view: set `permission`."""

    permission: str = ""

    @classmethod
    def as_view(cls, **initkwargs):
        return portal_view(cls.permission)(super().as_view(**initkwargs))


def _signin_url() -> str:
    from django.urls import reverse

    return reverse("portal:signin")


# Used by templates (navigation): which of the menu's pages this person may open.
def can(merchant_user: MerchantUser | None, *permissions: str) -> bool:
    return all(has_permission(merchant_user, permission) for permission in permissions)


__all__ = ["PERMISSIONS", "PortalView", "can", "has_permission", "merchant_time", "merchant_user_of",
           "method_decorator", "portal_view", "secure"]
