"""Portal writes (docs/portal.md): invites, accepting one, changing a member. Each is one transaction with its audit
row naming the person (apps.common.audit)."""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

import pghistory
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.db import transaction
from django.utils import timezone

from apps.common import audit
from apps.common.independence import account_act_record, independence_conflict
from apps.common.models import AccountAct
from apps.common.step_up import second_factor_confirm
from apps.merchants.models import Merchant
from apps.portal.access import PERMISSIONS
from apps.portal.models import Invite, MerchantUser, Role
from apps.portal.selectors import independent_owners


NO_SECOND_OWNER = ("An owner invite needs a second owner, independent of you, to approve it, and your merchant has "
                   "none. Ask our staff to verify and invite a second owner (they make the link on the server).")


def invite_hours() -> float:
    return float(getattr(settings, "PORTAL_INVITE_HOURS", 72))


class InviteError(ValueError):
    """An invite that cannot be made or used (the message is for the person)."""


@dataclass(frozen=True)
class NewInvite:
    invite: Invite
    token: str  # shown once: only its hash is stored

    def path(self) -> str:
        return f"/portal/invite/{self.token}/"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _username_free(username: str) -> bool:
    if get_user_model().objects.filter(username__iexact=username).exists():
        return False
    return not Invite.objects.filter(username__iexact=username, used_at__isnull=True, revoked_at__isnull=True,
                                     expires_at__gt=timezone.now()).exists()


@transaction.atomic(durable=True)
def invite_create(*, merchant: Merchant, username: str, role: str, actor=None,
                  actor_label: str | None = None) -> NewInvite:
    """A one-time link for `username` to join `merchant` with `role`, valid PORTAL_INVITE_HOURS. Made by staff (a
    command, actor_label 'cli') or by the merchant's owner (actor: their user). The token is returned once."""
    username = username.strip()
    if role not in Role.values:
        raise InviteError(f"unknown role {role!r}; one of {', '.join(Role.values)}")
    if not username or len(username) > 150:
        raise InviteError("a sign-in name (the person's e-mail) of 1-150 characters is needed")
    Merchant.objects.select_for_update().get(pk=merchant.pk)  # one invite at a time per merchant: names stay unique
    by_person = getattr(actor, "pk", None) is not None
    if by_person and (problem := _invite_rights(merchant=merchant, user=actor)):
        raise InviteError(f"You cannot invite people: {problem}.")
    needs_approval = by_person and role == Role.OWNER
    if needs_approval and not independent_owners(merchant_id=merchant.pk, of_user=actor):
        raise InviteError(NO_SECOND_OWNER)
    if not _username_free(username):
        raise InviteError(f"the sign-in name {username} is taken (or has an open invite)")
    token = secrets.token_urlsafe(32)
    invite = Invite.objects.create(
        merchant=merchant, username=username, role=role, token_hash=token_hash(token),
        expires_at=timezone.now() + timedelta(hours=invite_hours()), created_by=actor if by_person else None,
        created_by_label=audit.cli_label(actor_label) if actor_label else actor.get_username(),
        needs_approval=needs_approval)
    audit.record(actor=actor, actor_label=actor_label, action="portal.invite", obj=invite,
                 new={"merchant_no": merchant.merchant_no, "username": username, "role": role,
                      "expires_at": invite.expires_at.isoformat(), "needs_approval": needs_approval})
    return NewInvite(invite, token)


def _invite_rights(*, merchant: Merchant, user) -> str:
    """Why this person may not (or may no longer) invite people to `merchant` ("" when they may): an active owner."""
    person = MerchantUser.objects.select_related("user").filter(user_id=user.pk, merchant_id=merchant.pk).first()
    if person is None or not person.user.is_active:
        return "you are not a person of this merchant"
    if not person.is_active:
        return "your access is switched off"
    if person.role not in PERMISSIONS["manage_team"]:
        return f"you are {person.get_role_display().lower()}, not an owner"
    return ""


def invite_problem(invite: Invite | None) -> str:
    """Why this invite's link does not work now, in words for the person holding it ("" when it works)."""
    if problem := _invite_gone(invite):
        return problem
    if invite.waiting_for_approval:
        return ("This owner invite is waiting for a second owner of the merchant to approve it; the link works once "
                "they have. Ask them to approve it on their Team page.")
    return ""


def _invite_gone(invite: Invite | None) -> str:
    """Why this invite can never work ("" while it may): used, expired, withdrawn, or its maker lost the right."""
    if invite is None or invite.used_at or invite.expires_at <= timezone.now():
        return "This invite link is not valid any more: it was used, or it expired. Ask for a new one."
    if invite.revoked_at:
        return "This invite was withdrawn. Ask your merchant's owner for a new one."
    if invite.created_by_id is not None and _invite_rights(merchant=invite.merchant, user=invite.created_by):
        return ("This invite was withdrawn: the person who made it can no longer invite people (switched off, or "
                "no longer an owner). Ask an owner for a new one.")
    return ""


def invite_of_link(token: str) -> Invite | None:
    """The invite of this link, whatever its state (invite_problem says whether it works)."""
    return Invite.objects.select_related("merchant", "created_by").filter(token_hash=token_hash(token)).first()


def invite_approval_problem(*, invite: Invite, user) -> str:
    """Why this owner may not approve this owner invite ("" when they may): everything checked before the code."""
    if not invite.waiting_for_approval:
        return "This invite is not waiting for an approval."
    if problem := _invite_gone(invite):
        return problem
    if problem := _invite_rights(merchant=invite.merchant, user=user):
        return f"You cannot approve invites: {problem}."
    if invite.created_by_id == user.pk:
        return "You made this invite: another owner, independent of you, must approve it."
    if conflict := independence_conflict(invite.created_by, user):
        return f"You cannot approve this invite: {conflict}. An owner independent of its maker must approve it."
    return ""


def invite_approve(*, merchant: Merchant, invite_id: int, actor, otp_code: str) -> Invite:
    """A second owner, independent of the maker, approves an owner invite with a fresh code of their authenticator;
    only then does its link work. Everything but the code is checked first, so a refusal never spends the code."""
    invite = Invite.objects.select_related("merchant", "created_by").filter(pk=invite_id, merchant=merchant).first()
    if invite is None:
        raise InviteError("invite not found")
    if problem := invite_approval_problem(invite=invite, user=actor):
        raise InviteError(problem)
    second_factor_confirm(user=actor, code=otp_code)  # committed on its own: a wrong code is counted
    return _invite_approve(merchant=merchant, invite_id=invite_id, actor=actor)


@transaction.atomic(durable=True)
def _invite_approve(*, merchant: Merchant, invite_id: int, actor) -> Invite:
    invite = (Invite.objects.select_for_update(of=("self",)).select_related("merchant", "created_by")
              .get(pk=invite_id, merchant=merchant))
    if problem := invite_approval_problem(invite=invite, user=actor):  # again, under the lock: one approval
        raise InviteError(problem)
    invite.approved_by, invite.approved_at = actor, timezone.now()
    invite.save(update_fields=["approved_by", "approved_at"])
    audit.record(actor=actor, action="portal.invite_approve", obj=invite,
                 new={"username": invite.username, "role": invite.role, "maker": invite.created_by.get_username()})
    return invite


@transaction.atomic(durable=True)
def invite_accept(*, token: str, password: str) -> MerchantUser:
    """Use the link once: the person's user (never staff) with the password they chose, and their merchant user. The
    invite row is locked, so two submissions of the same link make one user."""
    invite = (Invite.objects.select_for_update(of=("self",)).select_related("merchant", "created_by")
              .filter(token_hash=token_hash(token)).first())
    if problem := invite_problem(invite):  # under the row lock: the maker's rights and the approval as they are now
        raise InviteError(problem)
    User = get_user_model()
    if User.objects.filter(username__iexact=invite.username).exists():
        raise InviteError(f"the sign-in name {invite.username} is taken; ask for a new invite")
    user = User(username=invite.username, email=invite.username if "@" in invite.username else "",
                is_staff=False, is_superuser=False)
    validate_password(password, user)
    user.set_password(password)
    # The settings trail of users (docs/staff-access.md) names who made this account: the invite, not "unknown".
    with pghistory.context(username=invite.username, portal_invite=invite.pk,
                           invited_by=invite.created_by_label):
        user.save()
    merchant_user = MerchantUser.objects.create(user=user, merchant=invite.merchant, role=invite.role)
    invite.used_at = timezone.now()
    invite.merchant_user = merchant_user
    invite.save(update_fields=["used_at", "merchant_user"])
    # The maker controls the account they invited (apps.common.independence); a staff-made invite names no person.
    account_act_record(actor=invite.created_by, subject=user, act=AccountAct.Act.INVITED,
                       note=f"portal invite {invite.pk} as {invite.role}")
    audit.record(actor=user, action="portal.invite_accept", obj=merchant_user,
                 new={"merchant_no": invite.merchant.merchant_no, "username": user.username, "role": invite.role,
                      "invite": invite.pk})
    return merchant_user


@transaction.atomic(durable=True)
def invite_revoke(*, merchant: Merchant, invite_id: int, actor) -> Invite:
    invite = Invite.objects.select_for_update().filter(pk=invite_id, merchant=merchant).first()
    if invite is None:
        raise InviteError("invite not found")
    if invite.used_at is None and invite.revoked_at is None:
        invite.revoked_at = timezone.now()
        invite.save(update_fields=["revoked_at"])
        audit.record(actor=actor, action="portal.invite_revoke", obj=invite, new={"username": invite.username})
    return invite


def _active_owner(role: str, is_active: bool) -> bool:
    return is_active and role == Role.OWNER


def _grants_more(old_role: str, old_active: bool, new_role: str, new_active: bool) -> bool:
    """The change gives the person a permission they did not have: a role with more, or access switched back on."""
    if not new_active:
        return False
    had = {name for name, roles in PERMISSIONS.items() if old_active and old_role in roles}
    return bool({name for name, roles in PERMISSIONS.items() if new_role in roles} - had)


@transaction.atomic(durable=True)
def member_update(*, merchant: Merchant, member_id: int, actor, role: str | None = None,
                  is_active: bool | None = None) -> MerchantUser:
    """The owner changes a member's role or switches them off. The merchant always keeps an active owner, and an
    owner cannot change themself (another owner, or our staff, must). Making someone an active owner waits for a
    second owner's approval (member_owner_approve). Whoever loses the right to invite loses their open invites and
    owner requests with it; whoever gains a permission is controlled by the owner who gave it
    (apps.common.independence)."""
    Merchant.objects.select_for_update().get(pk=merchant.pk)  # the "last owner" check and the change are one step
    member = MerchantUser.objects.select_for_update().select_related("user").filter(
        pk=member_id, merchant=merchant).first()
    if member is None:
        raise InviteError("member not found")
    if member.user_id == getattr(actor, "pk", None):
        raise InviteError("you cannot change your own role or access; another owner can")
    if problem := _invite_rights(merchant=merchant, user=actor):
        raise InviteError(f"You cannot change the team: {problem}.")
    if role is not None and role not in Role.values:
        raise InviteError(f"unknown role {role!r}")
    old = {"role": member.role, "is_active": member.is_active}
    new_role = role or member.role
    new_active = member.is_active if is_active is None else is_active
    if _active_owner(new_role, new_active) and not _active_owner(member.role, member.is_active):
        return _owner_request(merchant=merchant, member=member, actor=actor)
    member.role, member.is_active = new_role, new_active
    owners = MerchantUser.objects.filter(merchant=merchant, role=Role.OWNER, is_active=True).exclude(pk=member.pk)
    if not owners.exists() and not (member.role == Role.OWNER and member.is_active):
        raise InviteError("the merchant must keep an active owner")
    member.owner_requested_by, member.owner_requested_at = None, None  # a later change replaces a waiting request
    member.save(update_fields=["role", "is_active", "owner_requested_by", "owner_requested_at"])
    audit.record(actor=actor, action="portal.member_update", obj=member, old=old,
                 new={"role": member.role, "is_active": member.is_active, "username": member.user.username})
    if _grants_more(old["role"], old["is_active"], member.role, member.is_active):
        account_act_record(actor=actor, subject=member.user, act=AccountAct.Act.ROLE_GRANTED,
                           note=f"portal: {member.role}" + ("" if old["is_active"] else ", switched back on"))
    if not (member.is_active and member.role in PERMISSIONS["manage_team"]):
        _withdraw_requests_of(merchant=merchant, user=member.user, actor=actor,
                              why="its maker was switched off" if not member.is_active else "its maker is no "
                              "longer an owner")
    return member


def _owner_request(*, merchant: Merchant, member: MerchantUser, actor) -> MerchantUser:
    """Making `member` an active owner, asked for by `actor`: stored, and nothing else changes until a second owner,
    independent of `actor`, approves it. Refused when the merchant has no such owner."""
    if not independent_owners(merchant_id=merchant.pk, of_user=actor):
        raise InviteError(NO_SECOND_OWNER.replace("An owner invite", "Making someone an owner"))
    member.owner_requested_by, member.owner_requested_at = actor, timezone.now()
    member.save(update_fields=["owner_requested_by", "owner_requested_at"])
    audit.record(actor=actor, action="portal.member_owner_request", obj=member,
                 new={"username": member.user.username, "role": member.role, "is_active": member.is_active})
    return member


def member_owner_problem(*, member: MerchantUser, user) -> str:
    """Why this owner may not approve making `member` an active owner ("" when they may)."""
    if member.owner_requested_by_id is None:
        return f"Nothing is waiting for an approval for {member.user.get_username()}."
    if problem := _invite_rights(merchant=member.merchant, user=member.owner_requested_by):
        return f"The request was withdrawn: the person who made it can no longer change the team ({problem})."
    if problem := _invite_rights(merchant=member.merchant, user=user):
        return f"You cannot approve it: {problem}."
    if user.pk in (member.owner_requested_by_id, member.user_id):
        return "You asked for this (or it is about you): another owner, independent of you, must approve it."
    for other in (member.owner_requested_by, member.user):
        if conflict := independence_conflict(other, user):
            return f"You cannot approve this: {conflict}. An owner independent of them must approve it."
    return ""


def member_owner_approve(*, merchant: Merchant, member_id: int, actor, otp_code: str) -> MerchantUser:
    """A second owner, independent of whoever asked and of the person, makes `member` an active owner, with a fresh
    code of their authenticator. Everything but the code is checked first."""
    member = (MerchantUser.objects.select_related("user", "merchant", "owner_requested_by")
              .filter(pk=member_id, merchant=merchant).first())
    if member is None:
        raise InviteError("member not found")
    if problem := member_owner_problem(member=member, user=actor):
        raise InviteError(problem)
    second_factor_confirm(user=actor, code=otp_code)  # committed on its own: a wrong code is counted
    return _member_owner_approve(merchant=merchant, member_id=member_id, actor=actor)


@transaction.atomic(durable=True)
def _member_owner_approve(*, merchant: Merchant, member_id: int, actor) -> MerchantUser:
    Merchant.objects.select_for_update().get(pk=merchant.pk)  # member_update's lock order: merchant, then member
    member = (MerchantUser.objects.select_for_update(of=("self",))
              .select_related("user", "merchant", "owner_requested_by").get(pk=member_id, merchant=merchant))
    if problem := member_owner_problem(member=member, user=actor):
        raise InviteError(problem)
    old = {"role": member.role, "is_active": member.is_active}
    asker = member.owner_requested_by
    member.role, member.is_active, member.owner_requested_by, member.owner_requested_at = (
        Role.OWNER, True, None, None)
    member.save(update_fields=["role", "is_active", "owner_requested_by", "owner_requested_at"])
    audit.record(actor=actor, action="portal.member_owner_approve", obj=member, old=old,
                 new={"role": member.role, "is_active": True, "username": member.user.username,
                      "asked_by": asker.get_username()})
    account_act_record(actor=asker, subject=member.user, act=AccountAct.Act.ROLE_GRANTED,
                       note="portal: owner" + ("" if old["is_active"] else ", switched back on"))
    return member


def _withdraw_requests_of(*, merchant: Merchant, user, actor, why: str) -> None:
    """Every open invite and waiting owner request `user` made for `merchant`, withdrawn in the caller's
    transaction and audited: they were made with a right the person no longer has."""
    now = timezone.now()
    for invite in Invite.objects.select_for_update().filter(merchant=merchant, created_by=user, used_at__isnull=True,
                                                            revoked_at__isnull=True):
        invite.revoked_at = now
        invite.save(update_fields=["revoked_at"])
        audit.record(actor=actor, action="portal.invite_revoke", obj=invite, new={"username": invite.username},
                     reason=f"withdrawn: {why}")
    for member in MerchantUser.objects.select_for_update().select_related("user").filter(
            merchant=merchant, owner_requested_by=user):
        member.owner_requested_by, member.owner_requested_at = None, None
        member.save(update_fields=["owner_requested_by", "owner_requested_at"])
        audit.record(actor=actor, action="portal.member_owner_withdraw", obj=member,
                     new={"username": member.user.username}, reason=f"withdrawn: {why}")
