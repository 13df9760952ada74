"""The portal's base: who gets in (merchant users with a second factor, never staff), and staff never via it."""

import pytest

from tests.portal.support import PASSWORD, portal_login, portal_user
from tests.support.staff import admin_login, fresh_totp_code

pytestmark = pytest.mark.django_db


def test_home_needs_a_signed_in_merchant_user_with_a_second_factor(client, merchant):
    assert client.get("/portal/").status_code == 302
    user = portal_user(merchant, "viewer")
    client.force_login(user)  # a password-only session (no verified device) is nobody to the portal
    response = client.get("/portal/")
    assert response.status_code == 302 and response["Location"].startswith("/portal/signin/")
    portal_login(client, user)
    response = client.get("/portal/")
    assert response.status_code == 200
    assert merchant.merchant_no in response.content.decode()
    assert "default-src 'self'" in response["Content-Security-Policy"]


def test_a_merchant_user_never_reaches_the_admin(client, merchant):
    portal_login(client, portal_user(merchant, "owner"))
    response = client.get("/admin/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_staff_cannot_use_the_portal(client, merchant, admin_user):
    admin_login(client, admin_user)
    assert client.get("/portal/").status_code == 302
    client.logout()
    response = client.post("/portal/signin/", {"username": admin_user.username, "password": "password"})
    assert response.status_code == 200 and "signin-error" in response.content.decode()


def test_password_then_totp_code_signs_in(client, merchant):
    user = portal_user(merchant, "finance")
    response = client.post("/portal/signin/", {"username": user.username, "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/portal/signin/code/"
    assert client.get("/portal/").status_code == 302  # not yet in
    device = user.totpdevice_set.get()
    response = client.post("/portal/signin/code/", {"code": fresh_totp_code(device)})
    assert response.status_code == 302 and response["Location"] == "/portal/"
    assert client.get("/portal/").status_code == 200


def test_a_merchant_users_password_opens_nothing_at_the_admins_sign_in(client, merchant):
    user = portal_user(merchant, "owner")
    response = client.post("/admin/login/", {"username": user.username, "password": PASSWORD})
    assert response.status_code == 200  # the admin's form refuses a non-staff account: no second step
    assert "staff_signin_pending" not in client.session
    assert client.get("/admin/").status_code == 302
