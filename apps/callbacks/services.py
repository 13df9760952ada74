"""Callback outbox: enqueue inside the order's transaction; dispatch to workers after commit."""

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.callbacks.models import CallbackEvent
from apps.merchants.models import Merchant


def callback_enqueue(*, merchant: Merchant, type: CallbackEvent.Type, platform_order_no: str,
                     payload: dict) -> CallbackEvent:
    """Write the event in the caller's transaction; a second enqueue of the same (order, type) is a no-op."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("callback_enqueue must run inside the transaction that changes the order")
    url = merchant.payout_callback_url if type != CallbackEvent.Type.COLLECTION_SUCCESS else merchant.collection_callback_url
    try:
        with transaction.atomic():
            event = CallbackEvent.objects.create(merchant=merchant, type=type, platform_order_no=platform_order_no,
                                                 url=url, payload=payload, next_attempt_at=timezone.now())
    except IntegrityError:
        return CallbackEvent.objects.get(platform_order_no=platform_order_no, type=type)
    transaction.on_commit(lambda: _dispatch(event.pk))
    return event


def _dispatch(event_id: int) -> None:
    from apps.callbacks.tasks import deliver_callback

    try:
        deliver_callback.delay(event_id)
    except Exception:  # noqa: BLE001 - broker down: the sweeper picks the event up later
        import logging

        logging.getLogger(__name__).warning("callback %s not dispatched; the sweeper will retry", event_id)
