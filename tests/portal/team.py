"""Merchant users for the portal's service tests: the real MerchantUser (`.user`, `.merchant`, `.role`, what the
services take) with a confirmed authenticator, and `.code()`: the code its app shows now."""

from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.portal.models import MerchantUser
from tests.portal.support import portal_user
from tests.support.staff import totp_code


def step_up_code(user) -> str:
    """The code the person's app shows now, as if its previous use were a time step ago: each step-up in a test
    needs a code the device has not accepted yet (django-otp takes each step once)."""
    TOTPDevice.objects.filter(user=user).update(last_t=-1, throttling_failure_count=0,
                                                throttling_failure_timestamp=None)
    return totp_code(TOTPDevice.objects.get(user=user, confirmed=True))


def member(merchant, role: str, username: str | None = None) -> MerchantUser:
    user = portal_user(merchant, role, username=username)
    person = MerchantUser.objects.select_related("user", "merchant").get(user=user)
    person.code = lambda: step_up_code(person.user)
    return person


def device_of(person) -> TOTPDevice:
    return TOTPDevice.objects.get(user=person.user, confirmed=True)
