"""Signed-in staff for admin tests: every admin session has a verified second factor (apps.common.staff_signin).

`admin_login(client, user)` gives a Django test client a verified session (the user gets a confirmed authenticator if
they have none); `browser_sign_in(page, base_url, username, ...)` signs in through the real pages with a password
and a TOTP code this module computes, as a staff member's phone would.
"""

import hashlib
import hmac
import struct
import time

from django_otp import DEVICE_ID_SESSION_KEY
from django_otp.plugins.otp_totp.models import TOTPDevice

PASSWORD = "pw-for-tests-1"


def add_authenticator(user) -> TOTPDevice:
    """The user's confirmed authenticator (TOTP device), created if they have none."""
    device = TOTPDevice.objects.filter(user=user, confirmed=True).first()
    return device or TOTPDevice.objects.create(user=user, name="Authenticator app", confirmed=True)


def totp_code(device: TOTPDevice, *, at: float | None = None) -> str:
    """The code an authenticator app shows for this device now (or at `at`), computed from its key as RFC 6238 says
    (HMAC-SHA1 of the time step, dynamic truncation), independently of django-otp's own code."""
    device.refresh_from_db()
    counter = int(((time.time() if at is None else at) - device.t0) // device.step)
    digest = hmac.new(device.bin_key, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    value = struct.unpack(">I", digest[offset:offset + 4])[0] & 0x7FFFFFFF
    return f"{value % 10 ** device.digits:0{device.digits}d}"


def fresh_totp_code(device: TOTPDevice) -> str:
    """A code of a time step this device has not accepted yet (a TOTP code works once): waits for the next step if
    the current one was used (a second sign-in of the same user within 30 s)."""
    device.refresh_from_db()
    while int((time.time() - device.t0) // device.step) <= device.last_t:
        time.sleep(0.5)
    return totp_code(device)


def admin_login(client, user):
    """A test client signed in as `user` with a verified second factor; returns the client."""
    device = add_authenticator(user)
    client.force_login(user)
    session = client.session
    session[DEVICE_ID_SESSION_KEY] = device.persistent_id
    session.save()
    return client


def browser_sign_in(page, base_url: str, username: str, *, password: str = PASSWORD,
                    next_path: str = "/admin/") -> None:
    """Signs in through the admin's pages in a real browser: password, then the authenticator's current code. The
    user must have a confirmed authenticator (add_authenticator)."""
    from django.contrib.auth import get_user_model

    device = TOTPDevice.objects.get(user=get_user_model().objects.get(username=username), confirmed=True)
    page.goto(f"{base_url}/admin/login/?next={next_path}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_selector("#id_code")
    page.fill("#id_code", fresh_totp_code(device))
    page.click("input[type=submit]")
    page.wait_for_load_state()
