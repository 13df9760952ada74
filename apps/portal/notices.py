"""Telling a merchant's people (docs/portal.md, "Notices"): a notice on the portal's home page until its reader
dismisses it, and an e-mail through Django's e-mail backend, sent only after the transaction that made the news
commits (a rolled-back change tells nobody)."""

import logging

from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from apps.merchants.models import Merchant
from apps.portal.models import MerchantUser, Notice, Role

logger = logging.getLogger(__name__)


class NoticeNotFound(LookupError):
    """Not a notice of this person (another person's notice is not found too)."""


def merchant_owners(*, merchant: Merchant, exclude_user_ids=()) -> list[MerchantUser]:
    """The merchant's active owners, with their users, but for `exclude_user_ids`."""
    return list(MerchantUser.objects.select_related("user")
                .filter(merchant=merchant, role=Role.OWNER, is_active=True, user__is_active=True)
                .exclude(user_id__in=list(exclude_user_ids)).order_by("pk"))


def notice_send(*, merchant: Merchant, people: list[MerchantUser], subject: str, body: str,
                email: bool = True) -> list[Notice]:
    """A notice for each person, in the caller's transaction; with `email`, the same words to each person's address
    after commit."""
    notices = Notice.objects.bulk_create([Notice(merchant=merchant, merchant_user=person, subject=subject[:200],
                                                 body=body) for person in people if person.merchant_id == merchant.pk])
    if email:
        mail_after_commit(to=[person.user.email for person in people], subject=subject, body=body)
    return notices


def mail_after_commit(*, to: list[str], subject: str, body: str) -> None:
    """One e-mail per address (no one sees another's address), sent once the caller's transaction commits. A failed
    send is logged, never raised: the change it tells of has happened, and the notice in the portal stays."""
    addresses = [address for address in dict.fromkeys(to) if address]

    def send() -> None:
        for address in addresses:
            try:
                send_mail(subject, body, None, [address])
            except Exception:  # noqa: BLE001 - any backend failure: logged, the others still go out
                logger.exception("portal e-mail %r could not be sent", subject)

    if addresses:
        transaction.on_commit(send)


def notices_open(*, merchant_user: MerchantUser) -> list[Notice]:
    """The person's notices not dismissed yet, newest first."""
    return list(Notice.objects.filter(merchant_user=merchant_user, dismissed_at__isnull=True))


@transaction.atomic(durable=True)
def notice_dismiss(*, merchant_user: MerchantUser, notice_id: int) -> Notice:
    notice = Notice.objects.select_for_update().filter(pk=notice_id, merchant_user=merchant_user).first()
    if notice is None:
        raise NoticeNotFound(f"No notice {notice_id}.")
    if notice.dismissed_at is None:
        notice.dismissed_at = timezone.now()
        notice.save(update_fields=["dismissed_at"])
    return notice
