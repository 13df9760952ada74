"""Second-factor codes sent at the same moment: django-otp's throttle (1, 2, 4, ... s after each
wrong code) counts every wrong code, and refuses every code, the right one too, while it holds. Real threads on
PostgreSQL, each a browser with its own half-done sign-in from its own address (so django-axes' per-address lockout
stays out of the count)."""

from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import Client
from django_otp.plugins.otp_totp.models import TOTPDevice

from tests.helpers import at_once
from tests.support.staff import PASSWORD, add_authenticator, totp_code

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 30


def half_signed_in(index: int) -> tuple[Client, str]:
    """A browser from its own address that gave ada's right password: the code step is next."""
    address = f"10.0.{index // 200}.{index % 200 + 1}"
    client = Client(REMOTE_ADDR=address)
    response = client.post("/admin/login/", {"username": "ada", "password": PASSWORD, "next": "/admin/"})
    assert (response.status_code, response["Location"]) == (302, "/admin/login/code/")
    return client, address


def wrong_code(device: TOTPDevice) -> str:
    right = int(totp_code(device))
    return f"{(right + 500_000) % 1_000_000:06d}"  # far from this step's code and its neighbours'


def test_concurrent_wrong_codes_are_each_counted_or_refused_by_the_throttle(settings):
    settings.OTP_TOTP_THROTTLE_FACTOR = 1  # django-otp's default: 1 s after one wrong code, 2 s after two, ...
    ada = User.objects.create_superuser("ada", password=PASSWORD)
    device = add_authenticator(ada)
    browsers = [half_signed_in(index) for index in range(THREADS)]
    code = wrong_code(device)

    outcomes = at_once(lambda index: browsers[index][0].post("/admin/login/code/", {"code": code}).status_code,
                       THREADS)
    assert [exc for _, exc in outcomes if exc] == []
    statuses = [status for status, _ in outcomes]
    device.refresh_from_db()
    # 200: the form again, "not right" (a failure counted); 429: refused by the throttle before any check.
    assert set(statuses) <= {200, 429}, statuses
    assert device.throttling_failure_count == statuses.count(200) >= 1, statuses

    # While the throttle holds (its clock: the last failure), the right code is refused too; nobody is signed in.
    client, _ = browsers[0]
    failed_at, delay = device.throttling_failure_timestamp, 2 ** (device.throttling_failure_count - 1)
    with time_machine.travel(failed_at + timedelta(seconds=delay / 2), tick=False):
        response = client.post("/admin/login/code/", {"code": totp_code(device)})
        assert response.status_code == 429
        assert client.get("/admin/").status_code == 302

    # Once it has passed, the right code signs in.
    with time_machine.travel(failed_at + timedelta(seconds=delay + 0.1), tick=False):
        response = client.post("/admin/login/code/", {"code": totp_code(device)})
        assert (response.status_code, response["Location"]) == (302, "/admin/")
    device.refresh_from_db()
    assert device.throttling_failure_count == 0
