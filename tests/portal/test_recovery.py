"""A merchant user's lost access recovered by two staff (apps/portal/recovery.py, docs/staff-access.md "Recovering a
merchant user's access"), end to end through the real pages: one staff member asks on the admin's merchant users
page, a second approves on the staff requests page, the person receives a one-time link by e-mail, sets a new
password, signs in and enrols a new authenticator with a real TOTP code. And every refusal, with nothing changed."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.utils import timezone
from django_otp import devices_for_user
from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.common.independence import account_act_record
from apps.common.models import AccountAct, AuditLog, StaffRequest
from apps.portal.models import AccessRecovery, Notice
from tests.portal.recovery import NEW_PASSWORD, link_token, recovery_approved, staff_pair
from tests.portal.support import portal_login
from tests.support.four_eyes import approval_form, staff_account
from tests.support.staff import PASSWORD, admin_login, totp_code

pytestmark = pytest.mark.django_db


def _ask(client, person, reason="lost phone; called back on the number on file"):
    return client.post("/admin/portal/merchantuser/", {"action": "ask_recovery", "_selected_action": [person.pk],
                                                       "apply": "1", "reason": reason}, follow=True)


def _decide(client, request_id, reason="checked the call-back record"):
    # Through the approval page, which sends back the change it showed (docs/back-office.md).
    return client.post("/admin/common/staffrequest/", approval_form(client, [request_id], reason=reason), follow=True)


def _unchanged(person, devices_before: int) -> None:
    """Nothing of the person changed: same devices, the old password works, no link, no acts, no notice, no mail."""
    person.user.refresh_from_db()
    assert sum(1 for _ in devices_for_user(person.user, confirmed=None)) == devices_before
    assert person.user.check_password(PASSWORD)
    assert not AccessRecovery.objects.exists()
    assert not AccountAct.objects.filter(act=AccountAct.Act.ACCESS_RESET).exists()
    assert not Notice.objects.exists() and not mail.outbox


def test_two_staff_recover_an_owner_who_lost_their_phone_and_the_owner_signs_in_with_a_new_authenticator(
        merchant, team, django_capture_on_commit_callbacks):
    person, other_owner = team["owner"], team["owner2"]
    old_device = TOTPDevice.objects.get(user=person.user)
    old_session = portal_login(Client(), person.user)  # whoever holds the account now
    ana, ben = staff_pair()
    asker, approver = admin_login(Client(), ana), admin_login(Client(), ben)

    page = asker.post("/admin/portal/merchantuser/", {"action": "ask_recovery", "_selected_action": [person.pk]})
    assert page.status_code == 200 and person.user.email in page.content.decode()  # where the link will go
    done = _ask(asker, person).content.decode()
    assert "it takes effect when a second person approves it" in done
    request = StaffRequest.objects.get(kind=StaffRequest.Kind.ACCESS_RECOVERY)
    assert request.status == StaffRequest.Status.PENDING and person.user.email in request.summary
    assert TOTPDevice.objects.filter(pk=old_device.pk).exists()  # asking changes nothing

    with django_capture_on_commit_callbacks(execute=True):
        decided = _decide(approver, request.pk).content.decode()
    assert f"Request #{request.pk} approved" in decided
    request.refresh_from_db()
    assert request.status == StaffRequest.Status.APPROVED and request.result["devices_removed"] == 1
    person.user.refresh_from_db()
    assert not person.user.has_usable_password()
    assert not list(devices_for_user(person.user, confirmed=None))
    # The old session (whoever held the account) is over.
    assert old_session.get("/portal/").status_code == 302
    # Both staff reset the person's access (the independence rule reads it).
    assert set(AccountAct.objects.filter(subject=person.user, act=AccountAct.Act.ACCESS_RESET)
               .values_list("actor__username", flat=True)) == {"desk-ana", "desk-ben"}
    # The link goes to the person's address only; staff never see it.
    token = link_token(person.user.email)
    assert token not in decided and token not in str(request.result) and token not in str(request.summary)
    assert all(token not in str(row.new) + row.reason for row in AuditLog.objects.all())
    assert AccessRecovery.objects.get().token_hash != token
    # The other owner is told: a notice on their home page and an e-mail.
    [notice] = Notice.objects.filter(merchant_user=other_owner)
    assert person.user.username in notice.subject
    home = portal_login(Client(), other_owner.user).get("/portal/").content.decode()
    assert person.user.username in home and 'id="notices"' in home
    assert any(other_owner.user.email in message.to and person.user.username in message.subject
               for message in mail.outbox)
    assert not Notice.objects.filter(merchant_user=person).exists()

    # The person: the link, a new password, then the real sign-in with a new authenticator.
    browser = Client()
    form = browser.get(f"/portal/recover/{token}/")
    assert form.status_code == 200 and person.user.username in form.content.decode()
    assert browser.post(f"/portal/recover/{token}/", {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD}
                        ).status_code == 302
    assert browser.post("/portal/signin/", {"username": person.user.username, "password": PASSWORD}
                        ).status_code == 200  # the old password is gone
    step = browser.post("/portal/signin/", {"username": person.user.username, "password": NEW_PASSWORD})
    assert step.status_code == 302 and step["Location"].endswith("/portal/signin/enrol/")
    browser.get("/portal/signin/enrol/")
    new_device = TOTPDevice.objects.get(user=person.user, confirmed=False)
    codes = browser.post("/portal/signin/enrol/", {"code": totp_code(new_device)})
    assert codes.status_code == 200 and "recovery" in codes.content.decode().lower()
    home = browser.get("/portal/")
    assert home.status_code == 200 and 'id="cooling-off"' in home.content.decode()
    assert TOTPDevice.objects.get(user=person.user, confirmed=True).pk != old_device.pk
    assert AuditLog.objects.filter(action="portal.access_recovery_complete", actor=person.user).exists()
    # Once only.
    again = Client().get(f"/portal/recover/{token}/")
    assert again.status_code == 404 and 'id="recover-invalid"' in again.content.decode()


def test_the_staff_member_who_asked_cannot_approve_the_recovery(merchant, team, django_capture_on_commit_callbacks):
    person = team["owner"]
    ana, _ = staff_pair()
    asker = admin_login(Client(), ana)
    _ask(asker, person)
    request = StaffRequest.objects.get(kind=StaffRequest.Kind.ACCESS_RECOVERY)
    with django_capture_on_commit_callbacks(execute=True):
        page = _decide(asker, request.pk).content.decode()
    assert "a second person must decide it" in page
    request.refresh_from_db()
    assert request.status == StaffRequest.Status.PENDING
    _unchanged(person, devices_before=1)


def test_an_approver_who_shares_a_controller_with_the_requester_is_refused(merchant, team,
                                                                          django_capture_on_commit_callbacks):
    """One superuser's two accounts are not two people: root made both desk accounts."""
    person = team["owner"]
    ana, ben = staff_pair()
    root = staff_account("root")
    for made in (ana, ben):
        account_act_record(actor=root, subject=made, act=AccountAct.Act.CREATED)
    _ask(admin_login(Client(), ana), person)
    request = StaffRequest.objects.get(kind=StaffRequest.Kind.ACCESS_RECOVERY)
    with django_capture_on_commit_callbacks(execute=True):
        page = _decide(admin_login(Client(), ben), request.pk).content.decode()
    assert "desk-ana and desk-ben are not independent" in page and "root created" in page
    assert "needs two independent people" in page
    request.refresh_from_db()
    assert request.status == StaffRequest.Status.PENDING
    _unchanged(person, devices_before=1)


def test_staff_who_set_the_persons_password_can_neither_ask_for_nor_approve_their_recovery(
        merchant, team, django_capture_on_commit_callbacks):
    """The insider who took the account over is not the one to recover it."""
    person = team["owner"]
    ana, ben = staff_pair()
    insider = staff_account("insider")
    account_act_record(actor=insider, subject=person.user, act=AccountAct.Act.PASSWORD_SET)
    page = _ask(admin_login(Client(), insider), person).content.decode()
    assert "controls or shares a controller with" in page
    assert not StaffRequest.objects.exists()
    _ask(admin_login(Client(), ana), person)
    request = StaffRequest.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        page = _decide(admin_login(Client(), insider), request.pk).content.decode()
    assert "insider set the password of" in page
    request.refresh_from_db()
    assert request.status == StaffRequest.Status.PENDING
    person.user.refresh_from_db()
    assert person.user.check_password(PASSWORD) and TOTPDevice.objects.filter(user=person.user).exists()


def test_a_person_without_an_email_address_cannot_be_recovered(merchant, team):
    person = team["owner"]
    get_user_model().objects.filter(pk=person.user.pk).update(email="")
    page = _ask(admin_login(Client(), staff_pair()[0]), person).content.decode()
    assert "has no e-mail address on record" in page
    assert not StaffRequest.objects.exists()


def test_an_expired_recovery_link_does_not_work_and_changes_nothing(merchant, team,
                                                                   django_capture_on_commit_callbacks):
    person = team["owner"]
    token = recovery_approved(person, django_capture_on_commit_callbacks)
    AccessRecovery.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    page = Client().post(f"/portal/recover/{token}/", {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    assert page.status_code == 404 and 'id="recover-invalid"' in page.content.decode()
    person.user.refresh_from_db()
    assert not person.user.has_usable_password() and AccessRecovery.objects.get().used_at is None


def test_a_used_recovery_link_does_not_set_a_second_password(merchant, team, django_capture_on_commit_callbacks):
    person = team["owner"]
    token = recovery_approved(person, django_capture_on_commit_callbacks)
    assert Client().post(f"/portal/recover/{token}/", {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD}
                         ).status_code == 302
    page = Client().post(f"/portal/recover/{token}/", {"password1": "someone-elses-pass-9",
                                                       "password2": "someone-elses-pass-9"})
    assert page.status_code == 404
    person.user.refresh_from_db()
    assert person.user.check_password(NEW_PASSWORD)


def test_a_second_recovery_replaces_the_first_link(merchant, team, django_capture_on_commit_callbacks):
    person = team["owner"]
    first = recovery_approved(person, django_capture_on_commit_callbacks)
    second = recovery_approved(person, django_capture_on_commit_callbacks, requester=staff_account("desk-cy"),
                               approver=staff_account("desk-di"))
    assert Client().get(f"/portal/recover/{first}/").status_code == 404
    assert Client().get(f"/portal/recover/{second}/").status_code == 200


def test_staff_without_the_recovery_permission_cannot_ask(merchant, team):
    clerk = staff_account("clerk", superuser=False)
    page = admin_login(Client(), clerk).post("/admin/portal/merchantuser/", {
        "action": "ask_recovery", "_selected_action": [team["owner"].pk], "apply": "1", "reason": "x"})
    assert page.status_code == 403
    assert not StaffRequest.objects.exists()


def test_a_lockout_of_the_persons_name_is_lifted_by_the_recovery(merchant, team, django_capture_on_commit_callbacks):
    from axes.models import AccessAttempt

    person = team["owner"]
    AccessAttempt.objects.create(username=person.user.username, ip_address="203.0.113.9", user_agent="x",
                                 path_info="/portal/signin/", get_data="", post_data="", http_accept="*/*",
                                 failures_since_start=5)
    recovery_approved(person, django_capture_on_commit_callbacks)
    assert not AccessAttempt.objects.filter(username=person.user.username).exists()
