"""Access recoveries for portal tests: the staff request asked for and approved through the services (as the admin's
actions call them), the link read from the e-mail the person receives, and the link used."""

import re
from datetime import timedelta

from django.core import mail

from apps.common.models import StaffRequest
from apps.common.staff_requests import staff_request_approve, staff_request_create
from apps.portal import recovery
from apps.portal.models import AccessRecovery
from tests.support.four_eyes import staff_account

NEW_PASSWORD = "a-new-pass-for-tests-7"
LINK = re.compile(r"/portal/recover/([A-Za-z0-9_-]+)/")


def staff_pair():
    """Two independent superusers, as create_staff makes them on the server."""
    return staff_account("desk-ana"), staff_account("desk-ben")


def link_token(address: str) -> str:
    """The token of the newest recovery link e-mailed to `address`."""
    bodies = [message.body for message in mail.outbox if address in message.to and LINK.search(message.body)]
    assert bodies, f"no recovery link was e-mailed to {address}"
    return LINK.findall(bodies[-1])[-1]


def recovery_approved(person, capture, *, requester=None, approver=None) -> str:
    """`person` (a MerchantUser) recovered by two staff; returns the link's token."""
    if requester is None:
        requester, approver = staff_pair()
    request = staff_request_create(kind=StaffRequest.Kind.ACCESS_RECOVERY, requested_by=requester,
                                   reason="lost phone; called back on the number on file",
                                   payload=recovery.recovery_payload(merchant_user=person, requested_by=requester))
    with capture(execute=True):
        staff_request_approve(request_id=request.pk, approver=approver, reason="verified")
    return link_token(person.user.email)


def recovered(person, capture, *, hours_ago: float = 0) -> None:
    """`person` recovered, the link used `hours_ago` (0: now). The person then has no authenticator: a test signs
    them in with portal_login, which gives them one, as their enrolment would."""
    token = recovery_approved(person, capture)
    recovery.recovery_complete(token=token, password=NEW_PASSWORD)
    person.user.refresh_from_db()  # the new password's hash: a session made from the old one is over
    if hours_ago:
        AccessRecovery.objects.filter(merchant_user=person).update(used_at=recovery.timezone.now()
                                                                   - timedelta(hours=hours_ago))
