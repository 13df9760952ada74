"""Callback outbox, enqueue phase (docs/api.md, "Callbacks"): the business fields of each callback type, the event row
written in the order's own transaction, and the delivery task queued once that transaction has committed."""

import logging
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.callbacks.models import CallbackEvent
from apps.common import signing
from apps.common.wake import wake_mark_set, wake_marks_release
from apps.merchants.models import Merchant

logger = logging.getLogger(__name__)

# Added fresh to every attempt (docs/api.md, "Callbacks"); a business payload may not carry them.
SIGNING_FIELDS = ("key_version", "timestamp", "nonce", "sign_type", "sign")


# ------------------------------------------------------------------------------------------ payloads
# Business fields of each callback type (docs/api.md, "Callbacks"). Pure functions on duck-typed orders, so the
# collection and payout services build identical shapes; signing fields are added per attempt.

def _unix(value: datetime) -> int:
    return int(value.timestamp())


def _currency_code(order: Any) -> str:
    code = getattr(order, "currency_id", None)
    if code:
        return code
    currency = order.currency
    return getattr(currency, "code", currency)


def _status(value: Any) -> str:
    return getattr(value, "value", value)


def collection_success_payload(order: Any) -> dict:
    """docs/api.md, "Callbacks" (pay-in): status always SUCCESS; `attach` always present (empty string when the order
    has none)."""
    return {
        "platform_order_no": order.platform_order_no,
        "mch_order_no": order.mch_order_no,
        "amount": int(order.amount),
        "currency": _currency_code(order),
        "status": "SUCCESS",
        "paid_at": _unix(order.paid_at),
        "attach": getattr(order, "attach", "") or "",
    }


def payout_terminal_payload(payout: Any) -> dict:
    """docs/api.md, "Callbacks" (payout): a terminal snapshot; no finished_at, no attach; fail_reason only on
    FAILED/REJECTED."""
    status = _status(payout.status)
    if status not in ("SUCCESS", "FAILED", "REJECTED"):
        raise ValueError(f"payout {payout.platform_order_no} is not terminal ({status})")
    body = {
        "platform_order_no": payout.platform_order_no,
        "mch_order_no": payout.mch_order_no,
        "amount": int(payout.amount),
        "fee": int(payout.fee),
        "currency": _currency_code(payout),
        "status": status,
    }
    if status in ("FAILED", "REJECTED"):
        body["fail_reason"] = getattr(payout, "fail_reason", "") or ""
    return body


def payout_reversed_payload(payout: Any) -> dict:
    """docs/api.md, "Callbacks" (reversal): `event` = payout.reversed and no `status` (merchants route on `event`)."""
    return {
        "event": "payout.reversed",
        "reversed_at": _unix(payout.reversed_at),
        "platform_order_no": payout.platform_order_no,
        "mch_order_no": payout.mch_order_no,
        "amount": int(payout.amount),
        "fee": int(payout.fee),
        "currency": _currency_code(payout),
        "reversal_amount": int(payout.reversal_amount),
        "fee_refund": int(payout.fee_refund),
    }


def refund_terminal_payload(refund: Any) -> dict:
    """A refund's terminal snapshot: `event` = refund.terminal (a refund's number is not an order's, so merchants
    route on `event`); fail_reason only on FAILED. `refund.order` is the pay-in it refunds."""
    status = _status(refund.status)
    if status not in ("SUCCESS", "FAILED"):
        raise ValueError(f"refund {refund.refund_no} is not terminal ({status})")
    body = {
        "event": "refund.terminal",
        "mch_refund_no": refund.mch_refund_no,
        "refund_no": refund.refund_no,
        "mch_order_no": refund.order.mch_order_no,
        "platform_order_no": refund.order.platform_order_no,
        "currency": _currency_code(refund),
        "amount": int(refund.amount),
        "status": status,
        "finished_at": _unix(refund.finished_at),
    }
    if status == "FAILED":
        body["fail_reason"] = refund.fail_reason or ""
    return body


def _check_payload(payload: dict) -> None:
    reserved = sorted(set(payload) & set(SIGNING_FIELDS))
    if reserved:
        raise ValueError(f"callback payload may not carry signing fields {reserved}")
    for value in payload.values():
        if value is not None:
            signing.render_value(value)  # flat values only: objects, arrays, floats cannot be signed


# ------------------------------------------------------------------------------------------- enqueue

def callback_url_for(*, merchant: Merchant, type: str) -> str:
    if type in (CallbackEvent.Type.COLLECTION_SUCCESS, CallbackEvent.Type.REFUND_TERMINAL):
        return merchant.collection_callback_url
    return merchant.payout_callback_url


def callback_enqueue(*, merchant: Merchant, type: CallbackEvent.Type, platform_order_no: str,
                     payload: dict) -> CallbackEvent:
    """Write the event in the caller's transaction; its delivery task is queued after that transaction commits.

    The caller holds the order's row lock and writes the event with the order's one transition to that state
    (paid, terminal, reversed), so an (order, type) gets one event. A second one is a bug, and the unique
    constraint refuses it: IntegrityError, and the caller's transaction (its money included) rolls back. No
    savepoint around the INSERT (it cost two statements per pay-in: docs/performance.md)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("callback_enqueue must run inside the transaction that changes the order")
    _check_payload(payload)
    now = timezone.now()
    event = CallbackEvent.objects.create(
        merchant=merchant, type=type, platform_order_no=platform_order_no,
        url=callback_url_for(merchant=merchant, type=type), payload=payload,
        next_attempt_at=now, dispatched_at=now,
    )
    transaction.on_commit(lambda: callback_dispatch(event_id=event.pk, merchant_id=merchant.pk))
    return event


# Wake marks of a merchant (apps.common.wake), one per bulkhead slot (CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT): an enqueue
# that sets one queues a delivery task; when all are set, it queues none, because each mark is released by a task
# that then looks at the merchant's due events (apps.callbacks.deliver.callback_deliver), and this event was
# committed before the mark was seen. So a merchant has at most as many delivery tasks queued or running from
# enqueues as its bulkhead has slots, each of which delivers what the others' enqueues left. A task releases all of
# them at its end. A mark expires after WAKE_SECONDS: a task lost with its message then holds the merchant's next
# enqueues back this long at most (their events are also queued again by the sweeper, CALLBACK_REDISPATCH_SECONDS
# after enqueue).
WAKE_SECONDS = 10


def _wake_keys(merchant_id: int) -> list[str]:
    return [f"callbacks:wake:{merchant_id}:{slot}" for slot in range(settings.CALLBACK_MAX_IN_FLIGHT_PER_MERCHANT)]


def callback_wake_release(*, merchant_id: int) -> None:
    """Release the merchant's wake marks: the caller looks at the merchant's due events right after, for every
    enqueue that saw any of them set (the tasks that set the others find none left, and the merchant's next
    enqueues queue tasks again)."""
    wake_marks_release(_wake_keys(merchant_id), what=f"callbacks of merchant {merchant_id}")


def callback_dispatch(*, event_id: int, merchant_id: int | None = None) -> bool:
    """Queue a delivery task; a broker outage is logged, not raised: the event stays due in the database and the
    sweeper queues it later. With `merchant_id` (an enqueue), only if one of the merchant's wake marks was free: else
    the tasks that hold them deliver this event too (True then: the event is in hand)."""
    from apps.callbacks.tasks import deliver_callback  # the tasks import the delivery phase, which imports this

    if merchant_id is not None:
        try:
            if not wake_mark_set(_wake_keys(merchant_id), seconds=WAKE_SECONDS):
                return True
        except Exception as exc:  # noqa: BLE001 - Redis down: so is the broker; the sweeper queues the event
            logger.warning("callback event %s not dispatched (%s); the sweeper will retry", event_id,
                           type(exc).__name__)
            return False
    try:
        deliver_callback.delay(event_id)
    except Exception as exc:  # noqa: BLE001 - broker down: the event stays due in the database
        logger.warning("callback event %s not dispatched (%s); the sweeper will retry", event_id, type(exc).__name__)
        return False
    return True
