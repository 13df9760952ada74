"""A merchant user's re-send of a callback: the rules of POST /openapi/v1/callbacks/resend (apps/callbacks/resend.py:
one extra attempt at a dead or delivered event of this merchant, the same per-merchant limit per minute, a pending
one refused), audited with the person instead of the merchant number."""

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.callbacks.models import CallbackEvent
from apps.callbacks.resend import RESENDABLE, _resend, merchant_resend_allowed
from apps.common.errors import DomainError, ErrorCode
from apps.merchants.models import Merchant


def callback_resend_by_person(*, merchant: Merchant, event_id: int, person) -> CallbackEvent:
    """The API's budget is the merchant's, shared with its API calls: the portal cannot be used to go past it."""
    if not merchant_resend_allowed(merchant_id=merchant.pk):
        raise DomainError(ErrorCode.RATE_LIMITED, f"At most {settings.CALLBACK_RESEND_PER_MINUTE} callback re-sends "
                                                  "per minute (with your API's); try again in the next minute.")
    return _resend_one(merchant=merchant, event_id=event_id, person=person)


@transaction.atomic(durable=True)
def _resend_one(*, merchant: Merchant, event_id: int, person) -> CallbackEvent:
    event = CallbackEvent.objects.select_for_update().filter(merchant_id=merchant.pk, pk=event_id).first()
    if event is None:  # another merchant's event is not found, as a missing one
        raise DomainError(ErrorCode.ORDER_NOT_FOUND, "callback event not found.")
    if event.status not in RESENDABLE:
        raise DomainError(ErrorCode.DUPLICATE_ORDER, f"Callback {event.pk} is {event.status}: it is being delivered "
                                                     "on its retry schedule; only delivered or dead callbacks can be "
                                                     "re-sent.")
    _resend(event, now=timezone.now(), actor=person, actor_label=None,
            reason=f"re-send requested in the merchant portal ({merchant.merchant_no})")
    return event
