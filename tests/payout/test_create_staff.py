"""create_staff: a staff user with a named role, whose admin powers are those of the role (a CLI as docs/api.md,
"Operations CLI", describes)."""

import io
import json

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from apps.common.models import AuditLog
from apps.payout.models import Payout
from tests.payout.conftest import payout_in
from tests.payout.test_admin import PAYOUTS, QUEUE, act
from tests.support.staff import admin_login

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery 42"


def create_staff(username: str, role: str, *extra: str, password: str = PASSWORD) -> dict:
    out = io.StringIO()
    call_command("create_staff", username, "--role", role, "--password-stdin", *extra,
                 stdin=io.StringIO(password + "\n"), stdout=out)
    return json.loads(out.getvalue())


def logged_in(client, username: str):
    user = User.objects.get(username=username)
    assert user.check_password(PASSWORD)  # the password from stdin is the one that works
    return admin_login(client, user)  # and a second factor, as every admin session has


def test_risk_reviewer_sees_the_queue_and_approves(client, funded, adapter_calls, django_capture_on_commit_callbacks):
    printed = create_staff("rosa", "risk-reviewer", "--email", "rosa@example.com")
    assert printed == {"username": "rosa", "email": "rosa@example.com", "role": "risk-reviewer", "is_staff": True,
                       "is_superuser": False, "groups": ["Risk reviewer"], "admin_url": "http://127.0.0.1:8000/admin/",
                       "second_factor": "enrol at the first sign-in on admin_url: the password, then scan the QR code "
                                        "with an authenticator app and enter its code; keep the recovery codes shown "
                                        "once"}
    payout = payout_in(funded, "FROZEN")
    logged_in(client, "rosa")
    assert client.get(QUEUE).status_code == 200
    with django_capture_on_commit_callbacks(execute=False):
        response = act(client, QUEUE, "approve_selected", [payout], apply="1", reason="payee verified")
    assert "approved" in response.content.decode()
    assert Payout.objects.get(pk=payout.pk).status == "APPROVED"
    assert "reverse_selected" not in client.get(PAYOUTS).content.decode()  # reversing is the operators'


def test_operator_sees_payouts_and_may_reverse_but_cannot_see_the_queue_or_approve(client, funded, adapter_calls):
    printed = create_staff("otis", "operator")
    assert (printed["groups"], printed["is_superuser"]) == (["Payout operations"], False)
    frozen = payout_in(funded, "FROZEN")
    logged_in(client, "otis")
    assert client.get(QUEUE).status_code == 403
    assert act(client, QUEUE, "approve_selected", [frozen]).status_code == 403
    assert Payout.objects.get(pk=frozen.pk).status == "FROZEN"
    payouts = client.get(PAYOUTS)
    assert payouts.status_code == 200 and "reverse_selected" in payouts.content.decode()
    assert client.get("/admin/auth/user/").status_code == 403


def test_admin_is_a_superuser_who_can_do_everything(client, funded, adapter_calls):
    printed = create_staff("ada", "admin")
    assert (printed["is_superuser"], printed["groups"]) == (True, [])
    payout = payout_in(funded, "FROZEN")
    logged_in(client, "ada")
    assert client.get("/admin/auth/user/").status_code == 200
    assert client.get(QUEUE).status_code == 200
    act(client, QUEUE, "approve_selected", [payout], apply="1", reason="payee verified")
    assert Payout.objects.get(pk=payout.pk).status == "APPROVED"


def test_output_and_audit_never_carry_the_password_and_it_is_stored_hashed(db):
    out = io.StringIO()
    call_command("create_staff", "hana", "--role", "operator", "--password-stdin", stdin=io.StringIO(PASSWORD + "\n"),
                 stdout=out)
    assert PASSWORD not in out.getvalue()
    user = User.objects.get(username="hana")
    assert user.password != PASSWORD and user.check_password(PASSWORD)
    audit = AuditLog.objects.get(action="staff.create")
    assert PASSWORD not in json.dumps(audit.new) and audit.new["role"] == "operator"


def test_unknown_role_is_refused(db):
    with pytest.raises(CommandError, match="invalid choice: 'boss'"):
        create_staff("bo", "boss")
    assert not User.objects.filter(username="bo").exists()


def test_existing_user_is_refused_and_left_as_it_was(db):
    existing = User.objects.create_user("sam", password="old password 99")
    with pytest.raises(CommandError, match="user 'sam' already exists"):
        create_staff("sam", "admin")
    existing.refresh_from_db()
    assert (existing.is_superuser, existing.is_staff, existing.check_password("old password 99")) == (False, False, True)


@pytest.mark.parametrize("password, message", [("", "no password on stdin"), ("12345", "password refused"),
                                               ("password", "password refused")])
def test_missing_or_weak_password_is_refused(db, password, message):
    with pytest.raises(CommandError, match=message):
        create_staff("wes", "operator", password=password)
    assert not User.objects.filter(username="wes").exists()


def test_invalid_username_or_email_is_refused(db):
    with pytest.raises(CommandError, match="username"):
        create_staff("no spaces allowed", "operator")
    with pytest.raises(CommandError, match="email"):
        create_staff("eve", "operator", "--email", "not-an-address")
    assert not User.objects.filter(username__in=["no spaces allowed", "eve"]).exists()


def test_without_a_terminal_it_asks_for_password_stdin_instead_of_a_prompt(db):
    with pytest.raises(CommandError, match="--password-stdin"):
        call_command("create_staff", "tim", "--role", "operator", stdin=io.StringIO(PASSWORD + "\n"),
                     stdout=io.StringIO())
    assert not User.objects.filter(username="tim").exists()


def test_password_on_the_command_line_is_refused_without_echoing_it(db):
    with pytest.raises(CommandError, match="never taken on the command line") as excinfo:
        call_command("create_staff", "pat", "--role", "operator", "--password", PASSWORD)
    assert PASSWORD not in str(excinfo.value)
    assert not User.objects.filter(username="pat").exists()
