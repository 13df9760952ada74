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
from apps.merchants.models import Merchant
from apps.portal.models import Invite, MerchantUser, Role


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
    if not _username_free(username):
        raise InviteError(f"the sign-in name {username} is taken (or has an open invite)")
    token = secrets.token_urlsafe(32)
    invite = Invite.objects.create(
        merchant=merchant, username=username, role=role, token_hash=token_hash(token),
        expires_at=timezone.now() + timedelta(hours=invite_hours()), created_by=actor if getattr(actor, "pk", None)
        else None, created_by_label=audit.cli_label(actor_label) if actor_label else actor.get_username())
    audit.record(actor=actor, actor_label=actor_label, action="portal.invite", obj=invite,
                 new={"merchant_no": merchant.merchant_no, "username": username, "role": role,
                      "expires_at": invite.expires_at.isoformat()})
    return NewInvite(invite, token)


def invite_open(token: str) -> Invite | None:
    """The invite of this link if it can still be used (not used, not revoked, not expired), else None."""
    return (Invite.objects.select_related("merchant")
            .filter(token_hash=token_hash(token), used_at__isnull=True, revoked_at__isnull=True,
                    expires_at__gt=timezone.now()).first())


@transaction.atomic(durable=True)
def invite_accept(*, token: str, password: str) -> MerchantUser:
    """Use the link once: the person's user (never staff) with the password they chose, and their merchant user. The
    invite row is locked, so two submissions of the same link make one user."""
    invite = (Invite.objects.select_for_update().select_related("merchant")
              .filter(token_hash=token_hash(token)).first())
    if invite is None or invite.used_at or invite.revoked_at or invite.expires_at <= timezone.now():
        raise InviteError("This invite link is not valid any more (used, withdrawn or expired). Ask for a new one.")
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


@transaction.atomic(durable=True)
def member_update(*, merchant: Merchant, member_id: int, actor, role: str | None = None,
                  is_active: bool | None = None) -> MerchantUser:
    """The owner changes a member's role or switches them off. The merchant always keeps an active owner, and an
    owner cannot change themself (another owner, or our staff, must)."""
    Merchant.objects.select_for_update().get(pk=merchant.pk)  # the "last owner" check and the change are one step
    member = MerchantUser.objects.select_for_update().select_related("user").filter(
        pk=member_id, merchant=merchant).first()
    if member is None:
        raise InviteError("member not found")
    if member.user_id == getattr(actor, "pk", None):
        raise InviteError("you cannot change your own role or access; another owner can")
    if role is not None and role not in Role.values:
        raise InviteError(f"unknown role {role!r}")
    old = {"role": member.role, "is_active": member.is_active}
    member.role = role or member.role
    member.is_active = member.is_active if is_active is None else is_active
    owners = MerchantUser.objects.filter(merchant=merchant, role=Role.OWNER, is_active=True).exclude(pk=member.pk)
    if not owners.exists() and not (member.role == Role.OWNER and member.is_active):
        raise InviteError("the merchant must keep an active owner")
    member.save(update_fields=["role", "is_active"])
    audit.record(actor=actor, action="portal.member_update", obj=member, old=old,
                 new={"role": member.role, "is_active": member.is_active, "username": member.user.username})
    return member
