"""Staff sign-in as an attacker tries it: a password alone opens nothing, guessing passwords or codes locks the
account out from that address, enrolment cannot replace an existing authenticator, a session dies after a working
day without a request. (The browser tests sign in for real: test_staff_signin_browser.py.)"""

from datetime import timedelta

import pytest
import time_machine
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone
from django_otp.plugins.otp_static.models import StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.common.staff_signin import new_recovery_codes
from tests.support.staff import PASSWORD, add_authenticator, admin_login, totp_code

pytestmark = pytest.mark.django_db

ADMIN_PAGE = "/admin/merchants/merchant/"


@pytest.fixture
def ada(db):
    user = User.objects.create_superuser("ada", password=PASSWORD)
    add_authenticator(user)
    return user


@pytest.fixture(autouse=True)
def _no_code_throttling(settings):
    """django-otp refuses codes for 1, 2, 4, ... s after a wrong one; these tests count failures, not seconds."""
    settings.OTP_TOTP_THROTTLE_FACTOR = 0
    settings.OTP_STATIC_THROTTLE_FACTOR = 0


def password_step(client, username="ada", password=PASSWORD, **extra):
    return client.post("/admin/login/", {"username": username, "password": password, "next": ADMIN_PAGE}, **extra)


def code_step(client, code: str, **extra):
    return client.post("/admin/login/code/", {"code": code}, **extra)


def in_admin(client) -> bool:
    response = client.get(ADMIN_PAGE)
    return response.status_code == 200


def test_password_then_code_signs_in_and_goes_to_next(client, ada):
    response = password_step(client)
    assert (response.status_code, response["Location"]) == (302, "/admin/login/code/")
    assert not in_admin(client)  # the password alone: still nobody
    response = code_step(client, totp_code(TOTPDevice.objects.get(user=ada)))
    assert (response.status_code, response["Location"]) == (302, ADMIN_PAGE)
    assert in_admin(client)


def test_a_session_signed_in_without_the_second_factor_is_refused_by_the_admin(client, ada):
    client.force_login(ada)  # a password-only login(), as before this change
    response = client.get(ADMIN_PAGE)
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    assert client.get("/admin/").status_code == 302
    assert admin_login(client, ada) and in_admin(client)  # the helper's verified session: the check can pass


def test_wrong_passwords_lock_the_username_out_from_that_address(client, ada):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert password_step(client, password="wrong").status_code == 200  # the form again, with its error
    locked = password_step(client, password="wrong")
    assert locked.status_code == 429 and "Too many failed sign-ins" in locked.content.decode()
    locked = password_step(client)  # now even the right password
    assert locked.status_code == 429

    assert password_step(client, REMOTE_ADDR="10.9.8.7").status_code == 302  # the same user from elsewhere
    User.objects.create_user("bob", password=PASSWORD, is_staff=True)
    assert password_step(client, "bob").status_code == 302  # another user from here

    with time_machine.travel(timezone.now() + settings.AXES_COOLOFF_TIME + timedelta(minutes=1)):
        assert password_step(client).status_code == 302  # the lock lifts after the cool-off


def test_an_administrator_lifts_a_lock_at_once(client, ada):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        password_step(client, password="wrong")
    assert password_step(client).status_code == 429
    call_command("axes_reset_username", "ada", stdout=open("/dev/null", "w"))
    assert password_step(client).status_code == 302


def test_wrong_codes_after_the_right_password_lock_out_too(client, ada):
    assert password_step(client).status_code == 302
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = code_step(client, "000000")
        assert response.status_code == 200 and "not right" in response.content.decode()
    assert code_step(client, "000000").status_code == 429
    assert code_step(client, totp_code(TOTPDevice.objects.get(user=ada))).status_code == 429  # right code, too late
    assert not in_admin(client)
    assert password_step(client.__class__()).status_code == 429  # and a new sign-in from this address


def test_a_recovery_code_works_once(client, ada):
    codes = new_recovery_codes(ada)
    assert len(codes) == settings.STAFF_RECOVERY_CODES
    password_step(client)
    assert code_step(client, codes[0]).status_code == 302 and in_admin(client)
    assert not StaticToken.objects.filter(token=codes[0]).exists()
    assert StaticToken.objects.filter(device__user=ada).count() == settings.STAFF_RECOVERY_CODES - 1

    client.logout()
    password_step(client)
    response = code_step(client, codes[0])
    assert response.status_code == 200 and "not right" in response.content.decode()
    assert not in_admin(client)
    assert code_step(client, codes[1]).status_code == 302  # another one works


def test_the_same_authenticator_code_does_not_sign_in_twice(client, ada):
    code = totp_code(TOTPDevice.objects.get(user=ada))
    password_step(client)
    assert code_step(client, code).status_code == 302
    client.logout()
    password_step(client)
    assert code_step(client, code).status_code == 200  # replayed (a shoulder-surfed code): refused


def test_enrolment_needs_the_password_and_never_replaces_an_existing_authenticator(client, ada):
    assert client.get("/admin/login/enrol/")["Location"] == "/admin/login/"
    assert client.get("/admin/login/code/")["Location"] == "/admin/login/"
    password_step(client)
    assert client.get("/admin/login/enrol/")["Location"] == "/admin/login/code/"  # has one: no second QR code
    assert TOTPDevice.objects.filter(user=ada).count() == 1


def test_first_sign_in_enrols_and_only_a_code_of_the_new_authenticator_confirms_it(client, db):
    user = User.objects.create_user("nora", password=PASSWORD, is_staff=True)
    assert password_step(client, "nora")["Location"] == "/admin/login/enrol/"
    page = client.get("/admin/login/enrol/")
    assert page.status_code == 200 and "<svg" in page.content.decode()
    device = TOTPDevice.objects.get(user=user, confirmed=False)
    assert client.post("/admin/login/enrol/", {"code": "000000" if totp_code(device) != "000000" else "111111"}
                       ).status_code == 200
    assert not in_admin(client)
    response = client.post("/admin/login/enrol/", {"code": totp_code(device)})
    assert response.status_code == 200 and response.context["codes"]
    device.refresh_from_db()
    assert device.confirmed
    assert client.get("/admin/").status_code == 200  # signed in, verified
    assert StaticToken.objects.filter(device__user=user).count() == settings.STAFF_RECOVERY_CODES


def test_non_staff_cannot_start_a_sign_in(client, db):
    User.objects.create_user("eve", password=PASSWORD)
    response = password_step(client, "eve")
    assert response.status_code == 200 and "staff account" in response.content.decode()
    assert client.get("/admin/login/enrol/")["Location"] == "/admin/login/"


def test_a_session_ends_after_a_working_day_without_a_request(client, ada):
    assert settings.SESSION_COOKIE_AGE == 9 * 3600 and settings.SESSION_SAVE_EVERY_REQUEST
    assert settings.SESSION_EXPIRE_AT_BROWSER_CLOSE
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        admin_login(client, ada)
    with time_machine.travel(start + timedelta(hours=8), tick=False):
        assert in_admin(client)  # each request starts the 9 h again
    with time_machine.travel(start + timedelta(hours=16), tick=False):
        assert in_admin(client)
    with time_machine.travel(start + timedelta(hours=25, minutes=1), tick=False):
        assert not in_admin(client)  # 9 h 1 min since the last request


def test_the_code_must_follow_the_password_within_ten_minutes(client, ada):
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        password_step(client)
    with time_machine.travel(start + timedelta(minutes=11), tick=False):
        response = code_step(client, totp_code(TOTPDevice.objects.get(user=ada)))
        assert response["Location"] == "/admin/login/"  # start again, with the password
        assert not in_admin(client)


def test_a_secret_seen_on_another_sign_ins_enrolment_page_never_becomes_the_authenticator(db, client):
    """Someone who had a new member's password before the member enrolled opens the enrolment page and keeps its
    secret; the member then enrols on their own sign-in. The secret the member confirms must be a new one, and codes
    of the first secret must open nothing."""
    from django.test import Client

    user = User.objects.create_superuser("nora", password=PASSWORD)
    attacker = Client()
    password_step(attacker, "nora")
    assert attacker.get("/admin/login/enrol/").status_code == 200
    seen = TOTPDevice.objects.get(user=user, confirmed=False)
    assert attacker.get("/admin/login/enrol/").status_code == 200  # a reload keeps the same secret
    assert TOTPDevice.objects.get(user=user, confirmed=False).pk == seen.pk

    password_step(client, "nora")
    client.get("/admin/login/enrol/")
    owners = TOTPDevice.objects.get(user=user, confirmed=False)
    assert owners.bin_key != seen.bin_key
    assert client.post("/admin/login/enrol/", {"code": totp_code(owners)}).status_code == 200
    assert in_admin(client)

    seen.refresh_from_db = lambda: None  # deleted: its codes are computed from the secret the first page showed
    stolen = Client()
    password_step(stolen, "nora")
    assert code_step(stolen, totp_code(seen)).status_code == 200  # the code page again, with an error
    assert not in_admin(stolen)
    assert attacker.post("/admin/login/enrol/", {"code": totp_code(seen)})["Location"] == "/admin/login/code/"
    assert not in_admin(attacker)
    assert list(TOTPDevice.objects.filter(user=user).values_list("pk", flat=True)) == [owners.pk]
