"""A merchant user's lost access, recovered by two staff (docs/staff-access.md, "Recovering a merchant user's
access"), and the cooling-off after it (docs/portal.md, "Cooling-off").

Approving the staff request (apps.portal.staff_requests) removes the person's second-factor devices, makes their
password unusable and e-mails them a one-time link to their address on record (never shown to staff: a link in staff
hands is a way into the merchant's account). Through the link the person sets a new password, then signs in and
enrols a new authenticator. Both staff are recorded as having reset the person's access (AccountAct), the merchant's
other owners are told, and for PORTAL_RECOVERY_COOLING_HOURS after the link is used the person changes no key or
callback URL and approves no payout."""

import secrets
from datetime import datetime, timedelta

import pghistory
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.db import transaction
from django.utils import timezone
from django_otp import devices_for_user

from apps.common import audit
from apps.common.formatting import utc
from apps.common.independence import account_act_record, independence_conflict
from apps.common.models import AccountAct
from apps.merchants.selectors import merchant_administrator_conflict
from apps.portal.models import AccessRecovery, MerchantUser
from apps.portal.notices import mail_after_commit, merchant_owners, notice_send
from apps.portal.services import token_hash


class RecoveryRefused(ValueError):
    """The person, the request or the link does not allow the recovery; nothing changed. The message is for the
    person reading it (staff, or the merchant user at the link)."""


LINK_INVALID = "This recovery link is not valid any more (used, replaced or expired). Ask our support for a new one."


def link_hours() -> float:
    return float(settings.PORTAL_RECOVERY_LINK_HOURS)


def cooling_hours() -> float:
    return float(settings.PORTAL_RECOVERY_COOLING_HOURS)


# --- the staff request ------------------------------------------------------------------------------------------


def recovery_payload(*, merchant_user: MerchantUser, requested_by) -> dict:
    """What the request carries: the person as the requester saw them (name, merchant, address the link goes to)."""
    return {"merchant_user_id": merchant_user.pk, "username": merchant_user.user.get_username(),
            "merchant_no": merchant_user.merchant.merchant_no, "email": merchant_user.user.email,
            "requested_by": requested_by.pk}


def recovery_target(payload: dict, *, lock: bool = False) -> MerchantUser:
    """The person the request names, still as named (same user, merchant and address), or RecoveryRefused."""
    people = MerchantUser.objects.select_related("user", "merchant")
    person = (people.select_for_update(of=("self",)) if lock else people).filter(
        pk=payload.get("merchant_user_id")).first()
    if (person is None or person.user.get_username() != payload.get("username")
            or person.merchant.merchant_no != payload.get("merchant_no")):
        raise RecoveryRefused(f"There is no merchant user {payload.get('username')} of {payload.get('merchant_no')}.")
    name = person.user.get_username()
    if not person.is_active or not person.user.is_active:
        raise RecoveryRefused(f"{name} is switched off: an owner of {person.merchant.merchant_no} switches them on "
                              "first.")
    if person.user.is_staff or person.user.is_superuser:
        raise RecoveryRefused(f"{name} is a staff account, not a merchant user.")
    if not person.user.email:
        raise RecoveryRefused(f"{name} has no e-mail address on record: the recovery link goes only to the person's "
                              "own address.")
    if person.user.email.lower() != (payload.get("email") or "").lower():
        raise RecoveryRefused(f"{name}'s e-mail address changed since the request was made: ask again.")
    return person


def recovery_describe(payload: dict) -> str:
    """The whole change, for the approver."""
    person = recovery_target(payload)
    devices = sum(1 for _ in devices_for_user(person.user, confirmed=None))
    others = [owner.user.get_username() for owner in merchant_owners(merchant=person.merchant,
                                                                      exclude_user_ids=[person.user_id])]
    return (f"Recover the portal access of {person.user.get_username()} ({person.get_role_display().lower()} of "
            f"{person.merchant.merchant_no} {person.merchant.name}): remove their {devices} second-factor "
            f"device{'s' if devices != 1 else ''}, make their password unusable, and e-mail a one-time link "
            f"(valid {link_hours():g} h) to {person.user.email}. Told: "
            f"{', '.join(others) or 'no other owner'}. For {cooling_hours():g} h after the link is used the person "
            f"changes no key or callback URL and approves no payout.")


def recovery_changes(payload: dict) -> list[tuple[str, str, str, str]]:
    """The change field by field for the approver's table (docs/back-office.md, "What the approver reads"): (what,
    field, now, once approved)."""
    person = recovery_target(payload)
    devices = sum(1 for _ in devices_for_user(person.user, confirmed=None))
    others = [owner.user.get_username() for owner in merchant_owners(merchant=person.merchant,
                                                                      exclude_user_ids=[person.user_id])]
    subject = (f"merchant user {person.user.get_username()} ({person.get_role_display().lower()} of "
               f"{person.merchant.merchant_no} {person.merchant.name})")
    return [(subject, "second-factor devices", str(devices), "none (removed)"),
            (subject, "password", "usable" if person.user.has_usable_password() else "unusable",
             "unusable until the link is used"),
            (subject, "one-time link", "", f"e-mailed to {person.user.email}, valid {link_hours():g} h"),
            (subject, "other owners told", "", ", ".join(others) or "no other owner"),
            (subject, "after the link is used", "",
             f"for {cooling_hours():g} h no key or callback URL change and no payout approval")]


def recovery_conflict(payload: dict, user) -> str:
    """Why `user` may neither ask for nor decide this recovery ("" when nothing stands in the way): they administer
    the merchant, or they control the person's account or share a controller with it (the insider who set the
    person's password is not the one to recover it)."""
    conflict = merchant_administrator_conflict(merchant_no=payload.get("merchant_no", ""), user=user)
    if conflict:
        return conflict
    # The requester and the approver are two independent people: the staff request mechanism checks that for every
    # kind (apps.common.staff_requests).
    person = get_user_model().objects.filter(pk__in=MerchantUser.objects.filter(pk=payload.get("merchant_user_id"))
                                 .values("user_id")).first()
    if person is not None:
        conflict = independence_conflict(user, person)
        if conflict:
            return f"controls or shares a controller with {person.get_username()}'s account ({conflict})"
    return ""


def recovery_apply(*, payload: dict, actor, reason: str) -> dict:
    """The approval, in its transaction: the person's devices gone, password unusable, earlier open links replaced,
    a new link (hash stored, token e-mailed after commit), both staff recorded, the other owners told."""
    person = recovery_target(payload, lock=True)
    user, now = person.user, timezone.now()
    requester = get_user_model().objects.get(pk=payload["requested_by"])
    removed = 0
    for device in list(devices_for_user(user, confirmed=None)):
        device.delete()
        removed += 1
    user.set_unusable_password()
    user.save(update_fields=["password"])  # also ends every session of the person (Django's session hash)
    AccessRecovery.objects.filter(merchant_user=person, used_at__isnull=True, revoked_at__isnull=True).update(
        revoked_at=now)
    token = secrets.token_urlsafe(32)
    recovery = AccessRecovery.objects.create(
        merchant_user=person, requested_by=requester, approved_by=actor, email=user.email,
        token_hash=token_hash(token), expires_at=now + timedelta(hours=link_hours()))
    for staff in (requester, actor):
        account_act_record(actor=staff, subject=user, act=AccountAct.Act.ACCESS_RESET,
                           note=f"access recovery #{recovery.pk}")
    audit.record(actor=actor, action="portal.access_recovery", obj=recovery, reason=reason,
                 new={"username": user.get_username(), "merchant_no": person.merchant.merchant_no,
                      "requested_by": requester.get_username(), "devices_removed": removed, "email": user.email,
                      "expires_at": recovery.expires_at.isoformat()})
    link = f"{settings.API_ROOT}/portal/recover/{token}/"
    mail_after_commit(to=[user.email], subject=f"Recover your access to {person.merchant.name}'s portal", body=(
        f"Our staff recovered your access to the merchant portal of {person.merchant.name} "
        f"({person.merchant.merchant_no}), as you asked.\n\nOpen this link to choose a new password, then sign in "
        f"and add your authenticator app:\n\n{link}\n\nThe link works once, until {utc(recovery.expires_at)}. "
        f"For {cooling_hours():g} hours after you use it you cannot change API keys or callback URLs or approve "
        "payouts.\n\nIf you did not ask for this, tell your merchant's other owners and our support at once."))
    others = merchant_owners(merchant=person.merchant, exclude_user_ids=[user.pk])
    notice_send(merchant=person.merchant, people=others,
                subject=f"Access of {user.get_username()} recovered by our staff", body=(
                    f"On {utc(now)} our staff ({requester.get_username()}, approved by {actor.get_username()}) reset "
                    f"the access of {user.get_username()}: their authenticator was removed and a one-time link to "
                    f"choose a new password was e-mailed to {user.email}. For {cooling_hours():g} hours after they "
                    "use it, they cannot change API keys or callback URLs or approve payouts. If you did not expect "
                    "this, switch them off on the Team page and contact our support."))
    _lockout_reset_after_commit(user.get_username())
    return {"username": user.get_username(), "merchant_no": person.merchant.merchant_no, "email": user.email,
            "devices_removed": removed, "link_expires_at": recovery.expires_at.isoformat(),
            "access_recovery": recovery.pk}


def _lockout_reset_after_commit(username: str) -> None:
    """A lockout of the person's name (django-axes) would keep them out with their new password."""
    from axes.utils import reset

    transaction.on_commit(lambda: reset(username=username))


# --- the link -----------------------------------------------------------------------------------------------------


def recovery_open(token: str) -> AccessRecovery | None:
    """The recovery of this link if it can still be used (not used, not replaced, not expired), else None."""
    return (AccessRecovery.objects.select_related("merchant_user__user", "merchant_user__merchant")
            .filter(token_hash=token_hash(token), used_at__isnull=True, revoked_at__isnull=True,
                    expires_at__gt=timezone.now()).first())


@transaction.atomic(durable=True)
def recovery_complete(*, token: str, password: str) -> MerchantUser:
    """Use the link once: the person's new password (Django's validators). Their next sign-in enrols a new
    authenticator (they have none). The recovery row is locked: the same link submitted twice sets one password."""
    recovery = (AccessRecovery.objects.select_for_update().select_related("merchant_user__user")
                .filter(token_hash=token_hash(token)).first())
    if (recovery is None or recovery.used_at or recovery.revoked_at or recovery.expires_at <= timezone.now()
            or not recovery.merchant_user.is_active or not recovery.merchant_user.user.is_active):
        raise RecoveryRefused(LINK_INVALID)
    user = recovery.merchant_user.user
    validate_password(password, user)
    user.set_password(password)
    with pghistory.context(username=user.get_username(), portal_recovery=recovery.pk):
        user.save(update_fields=["password"])
    recovery.used_at = timezone.now()
    recovery.save(update_fields=["used_at"])
    audit.record(actor=user, action="portal.access_recovery_complete", obj=recovery,
                 new={"username": user.get_username(), "cooling_until": cooling_until_of(recovery).isoformat()})
    return recovery.merchant_user


# --- cooling-off --------------------------------------------------------------------------------------------------


def cooling_until_of(recovery: AccessRecovery) -> datetime:
    return recovery.used_at + timedelta(hours=cooling_hours())


def recovery_cooling(*, user_id: int) -> tuple[datetime, datetime] | None:
    """(when the person's access was last recovered, until when the cooling-off lasts), or None when it is over."""
    used_at = (AccessRecovery.objects.filter(merchant_user__user_id=user_id, used_at__isnull=False)
               .order_by("-used_at").values_list("used_at", flat=True).first())
    if used_at is None:
        return None
    until = used_at + timedelta(hours=cooling_hours())
    return (used_at, until) if until > timezone.now() else None


def recovery_cooling_refusal(*, user_id: int, doing: str) -> str:
    """Why this person may not `doing` now ("" when they may): the cooling-off after their access was recovered."""
    cooling = recovery_cooling(user_id=user_id)
    if cooling is None:
        return ""
    recovered, until = cooling
    return (f"Your access was recovered on {utc(recovered)}: for your merchant's safety you cannot {doing} until "
            f"{utc(until)}. Another owner can.")


def payout_approval_hold(user_id: int) -> str:
    """The cooling-off as payouts by hand asks for it (apps.payout_batches.services.APPROVER_HOLDS)."""
    return recovery_cooling_refusal(user_id=user_id, doing="approve payouts")
