"""Merchant users for portal tests (docs/portal.md, "Tests").

`portal_user(merchant, role)` makes a merchant user with a password and a confirmed authenticator;
`portal_login(client, user)` gives a test client a verified session (as tests.support.staff.admin_login does for
staff); `browser_sign_in(page, base_url, username)` signs in through the real pages with a TOTP code computed from
the device's key (RFC 6238, tests.support.staff.totp_code)."""

from django.contrib.auth import get_user_model
from django_otp import DEVICE_ID_SESSION_KEY

from apps.portal.models import MerchantUser
from tests.support.staff import PASSWORD, add_authenticator, fresh_totp_code

__all__ = ["PASSWORD", "browser_sign_in", "portal_login", "portal_user"]


def portal_user(merchant, role: str, *, username: str | None = None, authenticator: bool = True):
    """A merchant user of `merchant` (a Merchant or a MerchantCtx) with PASSWORD; returns the Django user."""
    merchant = getattr(merchant, "merchant", None) or merchant
    username = username or f"{role}@{merchant.merchant_no.lower()}.example"
    user = get_user_model().objects.create_user(username=username, password=PASSWORD, email=username)
    MerchantUser.objects.create(user=user, merchant=merchant, role=role)
    if authenticator:
        add_authenticator(user)
    return user


def portal_login(client, user):
    """A test client signed in to the portal as `user` with a verified second factor; returns the client."""
    device = add_authenticator(user)
    client.force_login(user)
    session = client.session
    session[DEVICE_ID_SESSION_KEY] = device.persistent_id
    session.save()
    return client


def browser_sign_in(page, base_url: str, username: str, *, password: str = PASSWORD, next_path: str = "") -> None:
    """Signs in through the portal's pages in a real browser: password, then the authenticator's current code."""
    from django_otp.plugins.otp_totp.models import TOTPDevice

    device = TOTPDevice.objects.get(user__username=username, confirmed=True)
    page.goto(f"{base_url}/portal/signin/" + (f"?next={next_path}" if next_path else ""))
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#signin-form button[type=submit]")
    page.wait_for_selector("#id_code")
    page.fill("#id_code", fresh_totp_code(device))
    page.click("#code-form button[type=submit]")
    page.wait_for_selector("#portal-nav")
