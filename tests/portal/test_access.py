"""Who may open what (docs/portal.md, "Roles"), invites (one-time, expiring), the second factor, lockout."""

import io
import json
import threading
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from apps.common.models import AuditLog
from apps.portal.models import Invite, MerchantUser
from apps.portal.services import invite_create
from tests.portal.support import PASSWORD, portal_login, portal_user
from tests.support.staff import fresh_totp_code

pytestmark = pytest.mark.django_db

EVERY_PAGE = ["/portal/", "/portal/payins/", "/portal/payouts/", "/portal/payins/export.csv",
              "/portal/payouts/export.csv", "/portal/statements/", "/portal/team/"]
ALLOWED = {
    "owner": set(EVERY_PAGE),
    "finance": {"/portal/", "/portal/payins/", "/portal/payouts/", "/portal/payins/export.csv",
                "/portal/payouts/export.csv", "/portal/statements/"},
    "developer": {"/portal/", "/portal/payins/", "/portal/payouts/"},
    "viewer": {"/portal/", "/portal/payins/", "/portal/payouts/"},
}


@pytest.mark.parametrize("role", ["owner", "finance", "developer", "viewer"])
def test_each_role_opens_its_pages_and_gets_403_on_the_others(client, merchant, role):
    portal_login(client, portal_user(merchant, role))
    for path in EVERY_PAGE:
        status = client.get(path).status_code
        assert status == (200 if path in ALLOWED[role] else 403), (role, path, status)


@pytest.mark.parametrize("role, may_resend", [("owner", True), ("finance", True), ("developer", True),
                                              ("viewer", False)])
def test_only_roles_with_the_permission_may_resend_a_callback(client, shops, role, may_resend):
    a, _ = shops
    portal_login(client, portal_user(a.merchant, role))
    page = client.get(f"/portal/payins/{a.payin.platform_order_no}/").content.decode()
    assert ('data-testid="resend"' in page) is may_resend
    response = client.post(f"/portal/callbacks/{a.event.pk}/resend/")
    assert response.status_code == (302 if may_resend else 403)
    a.event.refresh_from_db()
    assert a.event.status == ("pending" if may_resend else "dead")


def test_viewer_and_developer_see_payee_accounts_masked_even_on_the_order_page(client, shops):
    a, _ = shops
    portal_login(client, portal_user(a.merchant, "viewer"))
    page = client.get(f"/portal/payouts/{a.payout.platform_order_no}/").content.decode()
    assert "0012345678" not in page and "••••5678" in page


def test_every_page_and_export_of_a_signed_out_visitor_goes_to_sign_in(client, shops):
    a, _ = shops
    for path in EVERY_PAGE + [f"/portal/payins/{a.payin.platform_order_no}/"]:
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/portal/signin/"), path
    assert client.post(f"/portal/callbacks/{a.event.pk}/resend/").status_code == 302


def test_a_switched_off_member_is_out_at_once(client, merchant):
    user = portal_user(merchant, "finance")
    portal_login(client, user)
    assert client.get("/portal/").status_code == 200
    MerchantUser.objects.filter(user=user).update(is_active=False)
    assert client.get("/portal/").status_code == 302


# --- invites -------------------------------------------------------------------------------------------------------

def invite_by_command(merchant_no: str, username: str, role: str) -> dict:
    """The command's output, with the link's path (what a test client opens) as "path"."""
    out = io.StringIO()
    call_command("portal_invite", merchant_no, "--username", username, "--role", role, "--operator", "sam",
                 stdout=out)
    made = json.loads(out.getvalue())
    return {**made, "path": urlsplit(made["invite_url"]).path}


def test_staff_invite_link_is_absolute_as_create_staffs_admin_url(merchant, settings):
    settings.API_ROOT = "https://pay.example.com"
    made = invite_by_command(merchant.merchant_no, "abs@acme.example", "viewer")
    assert made["invite_url"] == f"https://pay.example.com{made['path']}"
    assert made["path"].startswith("/portal/invite/")


NEW_PASSWORD = "a-long-new-password-17"


def test_staff_invite_link_makes_a_non_staff_user_once(client, merchant):
    made = invite_by_command(merchant.merchant_no, "olivia@acme.example", "owner")
    path = made["path"]
    assert path.startswith("/portal/invite/") and made["role"] == "owner"
    assert "olivia@acme.example" in client.get(path).content.decode()
    response = client.post(path, {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/portal/signin/"
    user = User.objects.get(username="olivia@acme.example")
    assert not user.is_staff and not user.is_superuser and user.check_password(NEW_PASSWORD)
    assert user.merchant_user.merchant == merchant.merchant and user.merchant_user.role == "owner"
    # Used: the same link again makes nothing and says so.
    response = client.post(path, {"password1": "another-password-99", "password2": "another-password-99"})
    assert response.status_code == 404 and "invite-invalid" in response.content.decode()
    assert client.get(path).status_code == 404
    assert User.objects.get(username="olivia@acme.example").check_password(NEW_PASSWORD)
    assert AuditLog.objects.get(action="portal.invite").actor_label == "cli:sam"
    assert AuditLog.objects.get(action="portal.invite_accept").actor == user
    # The users' settings trail names the account's maker: the invite and who made it, not "unknown".
    from apps.common.history import event_who
    from apps.common.models import UserEvent

    created = UserEvent.objects.filter(pgh_obj_id=user.pk, pgh_label="insert").first()
    assert created is not None and event_who(created) == "olivia@acme.example"
    assert created.pgh_context.metadata["invited_by"] == "cli:sam"


def test_an_expired_or_withdrawn_invite_does_nothing(client, merchant, time_machine):
    made = invite_by_command(merchant.merchant_no, "late@acme.example", "viewer")
    time_machine.move_to(Invite.objects.get().expires_at)
    response = client.post(made["path"], {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    assert response.status_code == 404
    assert not User.objects.filter(username="late@acme.example").exists()


def test_the_same_link_submitted_twice_at_once_makes_one_user(merchant, transactional_db):
    created = invite_create(merchant=merchant.merchant, username="twice@acme.example", role="viewer",
                            actor_label="cli")
    statuses = []

    def submit():
        statuses.append(Client().post(created.path(), {"password1": NEW_PASSWORD,
                                                       "password2": NEW_PASSWORD}).status_code)

    threads = [threading.Thread(target=submit) for _ in range(4)]
    [thread.start() for thread in threads]
    [thread.join() for thread in threads]
    assert sorted(statuses) == [302, 404, 404, 404]
    assert User.objects.filter(username="twice@acme.example").count() == 1


def test_invite_for_a_taken_name_or_a_staff_name_is_refused(merchant, admin_user):
    with pytest.raises(Exception, match="taken"):
        invite_create(merchant=merchant.merchant, username=admin_user.username, role="owner", actor_label="cli")


def test_owner_invites_from_the_team_page_and_others_cannot(client, merchant, other_merchant):
    owner = portal_user(merchant, "owner")
    portal_login(client, owner)
    response = client.post("/portal/team/", {"action": "invite", "username": "fin@acme.example",
                                             "role": "finance"})
    page = response.content.decode()
    assert response.status_code == 200 and 'id="invite-link"' in page
    invite = Invite.objects.get(username="fin@acme.example")
    assert invite.merchant == merchant.merchant and invite.created_by == owner
    assert AuditLog.objects.get(action="portal.invite").actor == owner
    # A finance person of the same merchant cannot invite.
    finance = Client()
    portal_login(finance, portal_user(merchant, "finance"))
    assert finance.post("/portal/team/", {"action": "invite", "username": "x@acme.example",
                                          "role": "owner"}).status_code == 403
    assert not Invite.objects.filter(username="x@acme.example").exists()


def test_owner_cannot_change_another_merchants_member(client, merchant, other_merchant):
    portal_login(client, portal_user(merchant, "owner"))
    theirs = portal_user(other_merchant, "finance")
    client.post("/portal/team/", {"action": "member", "member": theirs.merchant_user.pk, "active": "0"})
    theirs.merchant_user.refresh_from_db()
    assert theirs.merchant_user.is_active
    assert not AuditLog.objects.filter(action="portal.member_update").exists()


def test_owner_changes_a_role_and_the_merchant_keeps_an_owner(client, merchant):
    owner = portal_user(merchant, "owner")
    portal_login(client, owner)
    finance = portal_user(merchant, "finance")
    client.post("/portal/team/", {"action": "member", "member": finance.merchant_user.pk, "role": "viewer",
                                  "active": "1"})
    finance.merchant_user.refresh_from_db()
    assert finance.merchant_user.role == "viewer"
    audit = AuditLog.objects.get(action="portal.member_update")
    assert audit.actor == owner and audit.old["role"] == "finance" and audit.new["role"] == "viewer"
    # Their own row cannot be changed (no owner can demote the last owner, themself).
    response = client.post("/portal/team/", {"action": "member", "member": owner.merchant_user.pk,
                                             "role": "viewer"}, follow=True)
    assert "cannot change your own" in response.content.decode()
    owner.merchant_user.refresh_from_db()
    assert owner.merchant_user.role == "owner"


# --- sign-in -------------------------------------------------------------------------------------------------------

def test_first_sign_in_after_an_invite_enrols_an_authenticator(client, merchant):
    from tests.common.test_staff_signin_browser import code_from_secret

    made = invite_by_command(merchant.merchant_no, "new@acme.example", "viewer")
    client.post(made["path"], {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    response = client.post("/portal/signin/", {"username": "new@acme.example", "password": NEW_PASSWORD})
    assert response["Location"] == "/portal/signin/enrol/"
    page = client.get("/portal/signin/enrol/").content.decode()
    assert "<svg" in page
    secret = page.split('id="signin-secret">')[1].split("<")[0]
    assert client.get("/portal/").status_code == 302  # not in before the code
    response = client.post("/portal/signin/enrol/", {"code": code_from_secret(secret)})
    assert response.status_code == 200 and 'id="recovery-codes"' in response.content.decode()
    assert client.get("/portal/").status_code == 200


def test_the_password_alone_signs_nobody_in_and_a_wrong_code_is_refused(client, merchant):
    user = portal_user(merchant, "finance")
    client.post("/portal/signin/", {"username": user.username, "password": PASSWORD})
    response = client.post("/portal/signin/code/", {"code": "000000" if fresh_totp_code(
        user.totpdevice_set.get()) != "000000" else "111111"})
    assert "not right" in response.content.decode()
    assert client.get("/portal/").status_code == 302


def test_wrong_passwords_lock_the_name_out_then_even_the_right_one_is_refused(client, merchant, settings):
    user = portal_user(merchant, "finance")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = client.post("/portal/signin/", {"username": user.username, "password": "wrong"})
        assert response.status_code == 200 and "signin-error" in response.content.decode()
    response = client.post("/portal/signin/", {"username": user.username, "password": "wrong"})
    assert response.status_code == 429 and "locked-out" in response.content.decode()
    assert "admin" not in response.content.decode().lower()  # the portal's page, not the admin's
    response = client.post("/portal/signin/", {"username": user.username, "password": PASSWORD})
    assert response.status_code == 429
    assert client.get("/portal/").status_code == 302


def test_wrong_codes_lock_out_too(client, merchant, settings, time_machine):
    user = portal_user(merchant, "finance")
    device = user.totpdevice_set.get()
    client.post("/portal/signin/", {"username": user.username, "password": PASSWORD})
    wrong = "000000" if fresh_totp_code(device) != "000000" else "111111"
    last = None
    for _ in range(settings.AXES_FAILURE_LIMIT):
        device.refresh_from_db()
        type(device).objects.filter(pk=device.pk).update(throttling_failure_count=0)  # skip the per-device wait
        last = client.post("/portal/signin/code/", {"code": wrong})
    assert last.status_code == 429 and "locked-out" in last.content.decode()
    type(device).objects.filter(pk=device.pk).update(throttling_failure_count=0)
    response = client.post("/portal/signin/code/", {"code": fresh_totp_code(device)})
    assert response.status_code == 429
    assert client.get("/portal/").status_code == 302


def test_next_goes_only_to_a_portal_page(client, merchant):
    user = portal_user(merchant, "viewer")
    client.post("/portal/signin/", {"username": user.username, "password": PASSWORD,
                                    "next": "https://evil.example/"})
    response = client.post("/portal/signin/code/", {"code": fresh_totp_code(user.totpdevice_set.get())})
    assert response["Location"] == reverse("portal:home")


def test_a_weak_password_on_the_invite_page_is_refused_and_the_link_stays_usable(client, merchant):
    made = invite_by_command(merchant.merchant_no, "weak@acme.example", "viewer")
    response = client.post(made["path"], {"password1": "123", "password2": "123"})
    assert response.status_code == 200 and "invite-error" in response.content.decode()
    assert not User.objects.filter(username="weak@acme.example").exists()
    assert client.post(made["path"], {"password1": NEW_PASSWORD,
                                            "password2": NEW_PASSWORD}).status_code == 302
