"""Callback outbox, manual re-send (docs/api.md, "Callbacks"): one more attempt at a dead or delivered event, asked
for by an operator (admin action, resend_callbacks command) or by the merchant itself (POST
/openapi/v1/callbacks/resend)."""

import time
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.callbacks.enqueue import callback_dispatch
from apps.callbacks.models import CallbackEvent
from apps.common import audit
from apps.common.errors import DomainError, ErrorCode
from apps.common.limits import limit_spend
from apps.merchants.models import Merchant

RESENDABLE = (CallbackEvent.Status.DEAD, CallbackEvent.Status.DELIVERED)


def _resend(event: CallbackEvent, *, now: datetime, actor, actor_label: str | None, reason: str = "") -> None:
    """Make a locked, re-sendable event due now for one extra attempt, audited, queued after commit."""
    old = {"status": event.status, "attempts_count": event.attempts_count}
    event.status = CallbackEvent.Status.PENDING
    event.next_attempt_at = now
    event.dispatched_at = now
    event.resend_requested = True
    event.save(update_fields=["status", "next_attempt_at", "dispatched_at", "resend_requested"])
    audit.record(actor=actor, actor_label=actor_label, action="callback.resend", obj=event, old=old,
                 new={"status": event.status, "next_attempt_at": now.isoformat()}, reason=reason)
    transaction.on_commit(lambda pk=event.pk: callback_dispatch(event_id=pk))


@transaction.atomic(durable=True)
def callback_resend(*, event_ids: list[int], actor=None, actor_label: str | None = None,
                    statuses: tuple[str, ...] = RESENDABLE) -> list[CallbackEvent]:
    """One extra attempt now at each dead or delivered event; nothing else is reset (attempts keep counting, a
    failure makes the event dead again at once). Pending events are left alone: they are being retried already.
    `statuses` narrows which of the re-sendable states qualify (checked again under the row lock)."""
    now = timezone.now()
    allowed = [status for status in statuses if status in RESENDABLE]
    events = list(CallbackEvent.objects.select_for_update().filter(pk__in=event_ids, status__in=allowed)
                  .order_by("pk"))
    for event in events:
        _resend(event, now=now, actor=actor, actor_label=actor_label)
    return events


def _resend_window_key(merchant_id: int) -> str:
    return f"callback-resend:{merchant_id}:{int(time.time() // 60)}"


def merchant_resend_allowed(*, merchant_id: int) -> bool:
    """Spend one of the merchant's CALLBACK_RESEND_PER_MINUTE re-sends (fixed one-minute window, in the cache)."""
    return limit_spend(_resend_window_key(merchant_id), limit=settings.CALLBACK_RESEND_PER_MINUTE, timeout=120)


def callback_resend_by_merchant(*, merchant: Merchant, event_id: int | None = None,
                                platform_order_no: str | None = None, type: str | None = None,
                                person=None) -> CallbackEvent:
    """The merchant's own re-send of one of its events (by id, or by platform_order_no and type): the admin's rule,
    one extra attempt at a dead or delivered event. Rate-limited per merchant (1106); another merchant's event is
    not found (2002), as a missing one; a pending event is refused (2001/409, docs/api.md, "Callback events: list and
    re-send"). `person`: a merchant user re-sending in the portal (audited as that person; the same budget as the
    merchant's API calls)."""
    # Every request that reaches here spends the budget, found or not, so the endpoint cannot be used to probe ids
    # faster than the limit.
    if not merchant_resend_allowed(merchant_id=merchant.pk):
        raise DomainError(ErrorCode.RATE_LIMITED, f"At most {settings.CALLBACK_RESEND_PER_MINUTE} callback re-sends "
                                                  "per minute; try again in the next minute.")
    return _callback_resend_one(merchant=merchant, event_id=event_id, platform_order_no=platform_order_no, type=type,
                                person=person)


@transaction.atomic(durable=True)
def _callback_resend_one(*, merchant: Merchant, event_id: int | None, platform_order_no: str | None,
                         type: str | None, person) -> CallbackEvent:
    events = CallbackEvent.objects.select_for_update().filter(merchant_id=merchant.pk)  # scoped: never another's
    if event_id is not None:
        event = events.filter(pk=event_id).first()
    else:
        event = events.filter(platform_order_no=platform_order_no, type=type).first()
    if event is None:
        raise DomainError(ErrorCode.ORDER_NOT_FOUND, "callback event not found.")
    if event.status not in RESENDABLE:
        # 409: the request conflicts with the event's state; the event is being retried on its schedule already.
        raise DomainError(ErrorCode.DUPLICATE_ORDER, f"callback event {event.pk} is {event.status}: it is being "
                                                     "delivered on its retry schedule; only delivered or dead events "
                                                     "can be re-sent.")
    if person is None:
        _resend(event, now=timezone.now(), actor=None, actor_label=merchant.merchant_no,
                reason="re-send requested by the merchant (POST /openapi/v1/callbacks/resend)")
    else:
        _resend(event, now=timezone.now(), actor=person, actor_label=None,
                reason=f"re-send requested in the merchant portal ({merchant.merchant_no})")
    return event
