"""One person never in two seats, the staff side (docs/staff-access.md, "Independence"), through the real admin pages
with a second factor: no staff member acts on a merchant's portal user; an account made, reset or vouched for by
another, however far down the chain, is not a second person for staff requests or payout approvals; removing or
adding someone's second factor is an act on their account."""

import re

import pghistory
import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django_otp.plugins.otp_static.models import StaticDevice
from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.common.admin import StaffSecondFactorAdmin
from apps.common.independence import independence_conflict, second_factor_trail_acts
from apps.common.models import AccountAct, AuditLog, AuthenticatorEvent, StaffRequest, UserEvent
from apps.common.staff_signin import new_recovery_codes
from apps.merchants.models import Merchant
from apps.payout import services
from apps.payout.models import Payout, PayoutApproval
from tests.common.test_money_settings_four_eyes import merchant_form, user_change_form
from tests.payout.conftest import fund, money_snapshot, new_payout, staff_user
from tests.portal.support import portal_user
from tests.support.four_eyes import approval_form, staff_account
from tests.support.staff import PASSWORD, add_authenticator, admin_login, totp_code

pytestmark = pytest.mark.django_db

REQUESTS = "/admin/common/staffrequest/"
NEW_PASSWORD = "Pw-takeover-77!"
ATTACKER_URL = "https://attacker.example/cb"


def messages_of(response) -> str:
    return " ".join(str(m) for m in response.context["messages"]) if response.context else ""


def admin_post(client, url: str, data: dict) -> str:
    """POSTs through the admin and follows the redirect: the page's messages."""
    return messages_of(client.post(url, data, follow=True))


def add_staff_in_admin(client, username: str, *, superuser: bool = True) -> User:
    """What a signed-in staff member with the user admin does: adds an account, then ticks its flags."""
    response = client.post("/admin/auth/user/add/", {"username": username, "password1": PASSWORD,
                                                     "password2": PASSWORD, "usable_password": "true"})
    assert response.status_code == 302, response.context["adminform"].form.errors
    user = User.objects.get(username=username)
    assert user.is_staff  # the user admin makes staff accounts only
    if superuser:
        response = client.post(f"/admin/auth/user/{user.pk}/change/", user_change_form(user, is_superuser="on"))
        assert response.status_code == 302, response.context["adminform"].form.errors
    return User.objects.get(pk=user.pk)


def sign_in_through_the_pages(username: str, password: str) -> Client:
    """The admin's real sign-in: password, then (no authenticator left) enrolment with a code of the new one."""
    client = Client()
    response = client.post("/admin/login/", {"username": username, "password": password, "next": "/admin/"})
    assert response["Location"] == "/admin/login/enrol/"
    assert client.get("/admin/login/enrol/").status_code == 200
    device = TOTPDevice.objects.get(user__username=username, confirmed=False)
    response = client.post("/admin/login/enrol/", {"code": totp_code(device)})
    assert response.status_code == 200 and response.context["codes"]
    assert client.get("/admin/").status_code == 200
    return client


def approve_in_admin(client, request: StaffRequest) -> str:
    # Through the approval page, which sends back the change it showed (docs/back-office.md).
    return admin_post(client, REQUESTS, approval_form(client, [request.pk], reason="checked against the ticket"))


@pytest.fixture
def shop(merchant):
    """The merchant, its owner in the portal (password and authenticator) and its money."""
    fund(merchant, 100_000_000)
    return merchant


def ask_for_credit_and_callback(client, shop) -> list[StaffRequest]:
    """A ₱10,000 credit to the merchant and its payout callbacks sent to the asker's own address, both asked for in
    the admin: two pending staff requests."""
    response = client.post(f"{REQUESTS}add/", {"merchant_no": shop.merchant_no, "currency": "PHP",
                                                "amount": "1000000", "reason": "goodwill credit"})
    assert response.status_code == 302
    response = client.post(f"/admin/merchants/merchant/{shop.merchant.pk}/change/",
                           merchant_form(shop, payout_callback_url=ATTACKER_URL))
    assert response.status_code == 302
    asked = list(StaffRequest.objects.filter(status=StaffRequest.Status.PENDING).order_by("pk"))
    assert [r.kind for r in asked] == [StaffRequest.Kind.BALANCE_ADJUSTMENT, StaffRequest.Kind.MERCHANT_SETTING]
    return asked


def assert_nothing_applied(shop, asked: list[StaffRequest], before) -> None:
    assert money_snapshot(shop) == before
    assert Merchant.objects.get(pk=shop.merchant.pk).payout_callback_url != ATTACKER_URL
    assert all(StaffRequest.objects.get(pk=r.pk).status == StaffRequest.Status.PENDING for r in asked)


# --- 1: a superuser alone takes over a merchant owner's portal account -------------------------------------------


def test_a_superuser_cannot_set_a_merchant_owners_password_nor_delete_their_authenticator(client, shop):
    owner = portal_user(shop, "owner")
    recovery = StaticDevice.objects.create(user=owner, name="Recovery codes", confirmed=True)
    authenticator = TOTPDevice.objects.get(user=owner)
    admin_login(client, staff_account("root"))
    hash_before, trail_before = User.objects.get(pk=owner.pk).password, UserEvent.objects.count()

    said = admin_post(client, f"/admin/auth/user/{owner.pk}/password/",
                      {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"})
    assert "is a merchant's portal user, not a staff account" in said
    assert "docs/staff-access.md" in said and "Nothing was changed" in said
    said = admin_post(client, f"/admin/otp_totp/totpdevice/{authenticator.pk}/delete/", {"post": "yes"})
    assert "belongs to a merchant's portal user" in said
    said = admin_post(client, f"/admin/otp_static/staticdevice/{recovery.pk}/delete/", {"post": "yes"})
    assert "belongs to a merchant's portal user" in said

    assert User.objects.get(pk=owner.pk).password == hash_before and owner.check_password(PASSWORD)
    assert TOTPDevice.objects.filter(pk=authenticator.pk, confirmed=True).exists()
    assert StaticDevice.objects.filter(pk=recovery.pk).exists()
    assert UserEvent.objects.count() == trail_before and not AuthenticatorEvent.objects.filter(
        user_id=owner.pk, pgh_label="delete").exists()
    # The new password signs nobody in to the portal.
    response = Client().post("/portal/signin/", {"username": owner.username, "password": NEW_PASSWORD})
    assert "/portal/signin/code/" not in response.get("Location", "")


# Every page of one object that the user admin and the device admins have (Django's own and ours).
OBJECT_PAGES = {"auth_user": ["change", "delete", "history", "password_change"],
                "otp_totp_totpdevice": ["change", "delete", "history"],
                "otp_static_staticdevice": ["change", "delete", "history"]}


def test_no_admin_page_of_a_user_or_device_reaches_a_merchant_user(client, shop):
    owner = portal_user(shop, "owner")
    devices = {"auth_user": owner, "otp_totp_totpdevice": TOTPDevice.objects.get(user=owner),
               "otp_static_staticdevice": StaticDevice.objects.create(user=owner, name="Recovery codes")}
    root = staff_account("root")
    admin_login(client, root)
    before = (User.objects.get(pk=owner.pk).__dict__.copy(), TOTPDevice.objects.count(), StaticDevice.objects.count())
    for prefix, pages in OBJECT_PAGES.items():
        for page in pages:
            url = reverse(f"admin:{prefix}_{page}", args=[devices[prefix].pk])
            for method in ("get", "post"):
                response = getattr(client, method)(url, {"post": "yes", "username": "renamed", "is_staff": "on",
                                                         "password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
                assert response.status_code == 302, (method, url)
                assert response["Location"] == reverse(f"admin:{prefix}_changelist"), (method, url)
    after = (User.objects.get(pk=owner.pk).__dict__.copy(), TOTPDevice.objects.count(), StaticDevice.objects.count())
    before[0].pop("_state"), after[0].pop("_state")
    assert after == before
    # The lists hold staff only, so a bulk action cannot select a merchant user or their device either.
    assert owner.username not in client.get("/admin/auth/user/").content.decode()
    assert owner.username not in client.get("/admin/otp_totp/totpdevice/").content.decode()
    client.post("/admin/auth/user/", {"action": "delete_selected", "_selected_action": [owner.pk], "post": "yes"})
    client.post("/admin/otp_totp/totpdevice/", {"action": "delete_selected", "post": "yes",
                                                "_selected_action": [devices["otp_totp_totpdevice"].pk]})
    assert User.objects.filter(pk=owner.pk).exists() and TOTPDevice.objects.filter(user=owner).exists()
    # A staff member's own authenticator stays manageable there.
    assert root.username in client.get("/admin/otp_totp/totpdevice/").content.decode()


def test_django_otps_own_device_admin_with_its_qr_code_is_not_installed():
    assert type(admin.site._registry[TOTPDevice]) is StaffSecondFactorAdmin
    assert type(admin.site._registry[StaticDevice]) is StaffSecondFactorAdmin
    pages = [str(pattern.pattern) for pattern in admin.site._registry[TOTPDevice].get_urls()]
    assert not [page for page in pages if "qrcode" in page or "config" in page]


# --- 3: the independence rule goes the whole chain -----------------------------------------------------------------


def test_an_account_made_by_an_account_the_requester_made_cannot_approve_a_credit_or_a_callback_url(client, shop):
    root = staff_account("root")
    admin_login(client, root)
    a = add_staff_in_admin(client, "a")
    admin_login(client, a)
    b = add_staff_in_admin(client, "b")
    admin_login(client, root)
    asked = ask_for_credit_and_callback(client, shop)
    before = money_snapshot(shop)

    said = approve_in_admin(admin_login(Client(), b), asked[0]) + approve_in_admin(admin_login(Client(), b), asked[1])
    assert said.count("not independent") == 2, said
    assert "root created or changed the account of a, a created or changed the account of b" in said
    assert_nothing_applied(shop, asked, before)

    # Someone nobody in that chain made (on the server) approves: the requests take effect.
    carol = admin_login(Client(), staff_account("carol"))
    assert "approved" in approve_in_admin(carol, asked[0]) and "approved" in approve_in_admin(carol, asked[1])
    assert Merchant.objects.get(pk=shop.merchant.pk).payout_callback_url == ATTACKER_URL


def test_a_colleague_reset_by_an_accomplice_and_stripped_of_their_authenticator_cannot_approve(client, shop):
    root = staff_account("root")
    carl = staff_account("carl")
    add_authenticator(carl)
    admin_login(client, root)
    a = add_staff_in_admin(client, "a")
    # a resets carl's password; root deletes carl's authenticator, both in the admin
    said = admin_post(admin_login(Client(), a), f"/admin/auth/user/{carl.pk}/password/",
                      {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"})
    assert "Password changed successfully" in said
    device = TOTPDevice.objects.get(user=carl, confirmed=True)
    said = admin_post(client, f"/admin/otp_totp/totpdevice/{device.pk}/delete/", {"post": "yes"})
    assert "deleted successfully" in said
    asked = ask_for_credit_and_callback(client, shop)
    before = money_snapshot(shop)

    # root signs in as carl with the new password, enrols a phone of their own, and approves their own requests
    as_carl = sign_in_through_the_pages("carl", NEW_PASSWORD)
    said = approve_in_admin(as_carl, asked[0]) + approve_in_admin(as_carl, asked[1])
    assert said.count("not independent") == 2, said
    assert "root removed the second factor of carl" in said
    assert_nothing_applied(shop, asked, before)
    # Each act alone is enough: the deleter controls carl, and so does whoever reset carl's password.
    assert "root removed the second factor of carl" in independence_conflict(root, carl)
    assert "a set the password of carl" in independence_conflict(a, carl)


# --- 7: four eyes on a large payout are two people ------------------------------------------------------------------


def test_a_second_superuser_account_made_by_the_first_cannot_give_a_large_payouts_second_approval(
        client, shop, django_capture_on_commit_callbacks):
    payout = new_payout(shop, amount=50_000_000)  # ₱500,000: the default two-approval threshold
    assert (payout.status, payout.approvals_required) == (Payout.Status.FROZEN, 2)
    root = staff_account("root")
    admin_login(client, root)
    root2 = add_staff_in_admin(client, "root2")
    decide = f"/admin/payout/payoutreviewqueue/{payout.pk}/decide/"
    assert "a second reviewer must approve it" in admin_post(client, decide, {"decision": "approve",
                                                                             "reason": "payee verified"})
    before = money_snapshot(shop)

    with django_capture_on_commit_callbacks() as dispatched:
        said = admin_post(admin_login(Client(), root2), decide, {"decision": "approve", "reason": "looks fine"})
    assert "Refused" in said and "root created or changed the account of root2" in said
    assert "needs two independent people's approvals" in said
    payout.refresh_from_db()
    assert payout.status == Payout.Status.FROZEN and dispatched == []
    assert list(payout.approvals.values_list("reviewer__username", flat=True)) == ["root"]
    assert money_snapshot(shop) == before
    assert not AuditLog.objects.filter(action="payout.approve", object_id=str(payout.pk)).exists()

    # An independent reviewer gives the second approval.
    rita = staff_user("rita", "Risk reviewer")
    assert "approved: now APPROVED" in admin_post(admin_login(Client(), rita), decide,
                                                  {"decision": "approve", "reason": "invoice matches"})


def test_a_reviewer_controlled_by_whoever_asked_for_a_payout_may_not_decide_it(shop):
    asker, reviewer = staff_user("asker", "Risk reviewer"), staff_user("rolf", "Risk reviewer")
    payout = new_payout(shop, amount=50_000_000)
    Payout.objects.filter(pk=payout.pk).update(requested_by=asker)
    account_act = AccountAct.objects.create(actor=asker, subject=reviewer, act=AccountAct.Act.ACCESS_RESET)
    for service in (services.payout_approve, services.payout_reject):
        with pytest.raises(services.PayoutActionRefused, match="asker reset the access of rolf"):
            service(payout_id=payout.pk, reviewer=reviewer, reason="mine to decide")
    assert not PayoutApproval.objects.filter(payout=payout).exists()
    assert Payout.objects.get(pk=payout.pk).status == Payout.Status.FROZEN and account_act.pk


def test_an_account_dependent_on_the_first_approver_may_still_reject(shop):
    """A rejection moves no money and any one reviewer may give it: only approvals need two people."""
    rita, rolf = staff_user("rita", "Risk reviewer"), staff_user("rolf", "Risk reviewer")
    AccountAct.objects.create(actor=rita, subject=rolf, act=AccountAct.Act.CREATED)
    payout = new_payout(shop, amount=50_000_000)
    services.payout_approve(payout_id=payout.pk, reviewer=rita, reason="payee verified")
    with pytest.raises(services.PayoutActionRefused, match="rita created the account rolf"):
        services.payout_approve(payout_id=payout.pk, reviewer=rolf, reason="agree")
    assert services.payout_reject(payout_id=payout.pk, reviewer=rolf, reason="name mismatch").status == "REJECTED"


# --- second factors as acts, by whatever path ------------------------------------------------------------------------


def test_adding_a_second_factor_to_someones_account_in_a_named_context_counts(shop):
    root, colleague = staff_account("root"), staff_account("colleague")
    assert independence_conflict(root, colleague) == ""
    with pghistory.context(user=root.pk, username="root"):  # a service run from root's request
        TOTPDevice.objects.create(user=colleague, name="Authenticator app", confirmed=True)
    assert "root added a second factor to colleague" in independence_conflict(root, colleague)


def test_enrolling_ones_own_authenticator_is_no_act_on_anyone(db):
    nora = User.objects.create_user("nora", password=PASSWORD, is_staff=True)
    colleague = staff_account("colleague")
    sign_in_through_the_pages("nora", PASSWORD)
    assert TOTPDevice.objects.filter(user=nora, confirmed=True).exists() and StaticDevice.objects.filter(user=nora)
    assert AuthenticatorEvent.objects.filter(user_id=nora.pk).exists()  # recorded...
    assert list(act for act in second_factor_trail_acts({nora.pk}) if act.actor_id != nora.pk) == []  # ...as her own
    assert independence_conflict(nora, colleague) == ""


def test_a_shell_removing_a_device_names_nobody_and_the_trail_never_keeps_a_key(db):
    root, colleague = staff_account("root"), staff_account("colleague")
    device = add_authenticator(colleague)
    new_recovery_codes(colleague)
    device.delete()  # no context: a shell on the server
    assert independence_conflict(root, colleague) == ""
    assert AuthenticatorEvent.objects.filter(user_id=colleague.pk, pgh_label="delete").exists()
    kept = {field.name for field in AuthenticatorEvent._meta.fields}
    assert not kept & {"key", "last_t", "throttling_failure_count"}
    assert re.fullmatch(r"[0-9a-f]+", device.key) and device.key not in str(
        list(AuthenticatorEvent.objects.values()))


def test_a_bulk_delete_of_a_colleagues_authenticator_in_the_admin_is_an_act_on_them(client):
    root, colleague = staff_account("root"), staff_account("colleague")
    device = add_authenticator(colleague)
    admin_login(client, root)
    client.post("/admin/otp_totp/totpdevice/", {"action": "delete_selected", "_selected_action": [device.pk],
                                                "post": "yes"})
    assert not TOTPDevice.objects.filter(pk=device.pk).exists()
    assert "root removed the second factor of colleague" in independence_conflict(colleague, root)
    history = client.get("/admin/common/authenticatorevent/").content.decode()
    assert f"authenticator #{device.pk} of colleague" in history and "deleted" in history


def test_a_merchants_administrators_are_chosen_among_staff_accounts_only(client, shop):
    owner = portal_user(shop, "owner")
    admin_login(client, staff_account("root"))
    page = client.get(f"/admin/merchants/merchant/{shop.merchant.pk}/change/").content.decode()
    assert 'name="administrators"' in page and ">root<" in page and owner.username not in page
    data = merchant_form(shop, administrators=[owner.pk])
    response = client.post(f"/admin/merchants/merchant/{shop.merchant.pk}/change/", data)
    assert response.status_code == 200 and "administrators" in response.context["adminform"].form.errors
    assert not shop.merchant.administrators.exists()


def test_a_staff_account_stays_staff_in_the_admin(client):
    root, colleague = staff_account("root"), staff_account("colleague", superuser=False)
    admin_login(client, root)
    data = user_change_form(colleague)
    data.pop("is_staff")
    data["is_active"] = ""
    response = client.post(f"/admin/auth/user/{colleague.pk}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    colleague.refresh_from_db()
    assert colleague.is_staff and not colleague.is_active  # switched off, still a staff account in the list
    assert "colleague" in client.get("/admin/auth/user/").content.decode()


def test_a_staff_member_without_the_user_admin_learns_nothing_about_a_merchant_users_id(client, shop):
    owner = portal_user(shop, "owner")
    admin_login(client, staff_user("rita", "Risk reviewer"))
    for url in (f"/admin/auth/user/{owner.pk}/change/", f"/admin/auth/user/{owner.pk}/password/"):
        response = client.get(url)
        assert response.status_code == 403 and "merchant" not in response.content.decode(), url
    assert not list(client.get("/admin/").context["messages"])
