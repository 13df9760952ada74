"""Merchant users for the portal's service tests: an auth user with a confirmed authenticator, and the membership the
services take (`.user`, `.merchant`, `.role`)."""

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django_otp.plugins.otp_totp.models import TOTPDevice

from tests.support.staff import PASSWORD, totp_code


@dataclass
class Member:
    user: object
    merchant: object
    role: str

    @property
    def device(self) -> TOTPDevice:
        return TOTPDevice.objects.get(user=self.user, confirmed=True)

    def code(self) -> str:
        """The code the person's app shows now, as if its previous use were a time step ago: each step-up in a test
        needs a code the device has not accepted yet (django-otp takes each step once)."""
        TOTPDevice.objects.filter(user=self.user).update(last_t=-1, throttling_failure_count=0,
                                                         throttling_failure_timestamp=None)
        return totp_code(self.device)


def member(merchant, role: str, username: str | None = None) -> Member:
    username = username or f"{merchant.merchant_no.lower()}-{role}"
    user = get_user_model().objects.create_user(username=username, password=PASSWORD)
    TOTPDevice.objects.create(user=user, name="Authenticator app", confirmed=True)
    return Member(user=user, merchant=merchant, role=role)
