"""Four eyes on money settings in tests (apps.common.setting_changes): an admin save is a staff request; a second
person approves it through the service, as "Staff requests" in the admin does."""

import re

import pghistory
from django.contrib.auth import get_user_model

from apps.common.models import StaffRequest
from apps.common.staff_requests import staff_request_approve
from tests.support.staff import PASSWORD


def approve_last_request(*, approver_name: str = "second-root") -> StaffRequest:
    """Approve the newest pending staff request as a second superuser (created when missing); returns it."""
    approver = get_user_model().objects.filter(username=approver_name).first() or staff_account(approver_name)
    pending = StaffRequest.objects.filter(status=StaffRequest.Status.PENDING).order_by("-pk").first()
    assert pending is not None, "no pending staff request"
    return staff_request_approve(request_id=pending.pk, approver=approver, reason="checked by a second person")


def staff_account(username: str, *, superuser: bool = True, groups=()):
    """A staff account made as create_staff on the server makes it (its own settings-trail context, no admin user):
    inside a test's one transaction the last admin request's context would otherwise still be attached, and the
    account would count as made by that request's user."""
    with pghistory.context(command="create_staff", operator="tests"):
        user_model = get_user_model()
        user = (user_model.objects.create_superuser(username, password=PASSWORD) if superuser
                else user_model.objects.create_user(username, password=PASSWORD, is_staff=True))
        for group in groups:
            user.groups.add(group)
    return user


def approval_form(client, request_ids, *, reason: str, url: str = "/admin/common/staffrequest/") -> dict:
    """The approval page's form for `request_ids` as a signed-in client reads it, filled with `reason`: the action's
    fields and, per request, the digest of the change the page showed (staff_request_approve's `seen`)."""
    ids = [str(pk) for pk in request_ids]
    page = client.post(url, {"action": "approve_selected", "_selected_action": ids})
    seen = dict(re.findall(r'name="seen_(\d+)" value="([0-9a-f]*)"', page.content.decode()))
    return {"action": "approve_selected", "_selected_action": ids, "apply": "1", "reason": reason,
            **{f"seen_{pk}": seen.get(pk, "") for pk in ids}}
