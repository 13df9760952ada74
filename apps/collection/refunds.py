"""Refunds of paid pay-ins (docs/api.md, "Refunds"): create, the submission to the pay-in's channel, the channel's
answer.

Money: create holds `amount` (available → frozen) in the transaction that inserts the refund; SUCCESS lets the held
amount leave to the channel (pay-in clearing, the account the payment came in through); FAILED gives it back to
available. Never from settling. Lock order (docs/architecture.md, "Lock order"): the refund's key (its INSERT), the
pay-in's row, then the merchant's accounts inside the ledger; the answer locks the refund row, its hold, then the
accounts. Callbacks are outbox rows of the same transaction; the channel is called after commit.
"""

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone
from prometheus_client import Counter

from apps.callbacks.enqueue import callback_enqueue, refund_terminal_payload
from apps.callbacks.models import CallbackEvent
from apps.channels.base import UpstreamRejected, UpstreamUnavailable
from apps.channels.environment import ChannelNotAllowed
from apps.channels.refund_rules import PaymentTaken, payment_taken, refund_refusal
from apps.channels.submission import one_submission_at_a_time
from apps.channels.registry import payin_adapter
from apps.collection.models import CollectionOrder, Refund
from apps.collection.selectors import collection_order_for_merchant, refund_for_merchant
from apps.collection.services import lock_collection_order
from apps.common.errors import DomainError, ErrorCode
from apps.common.orders import order_create_or_replay
from apps.common.retry import retry_conflicts
from apps.ledger import selectors as ledger_selectors
from apps.ledger import services as ledger
from apps.ledger.models import AccountKind
from apps.merchants.models import Merchant

logger = logging.getLogger(__name__)

OUTCOME_SUCCEEDED = "succeeded"
OUTCOME_FAILED = "failed"


class RefundNotFound(LookupError):
    pass


def refunded_total(*, order_id: int, exclude_id: int | None = None) -> int:
    """What the pay-in has given back or is giving back: the sum of its refunds that are not FAILED."""
    # Summed here, not by an aggregate: an order has a few refunds, and the ORM's aggregate query cost refund/create
    # more CPU to build than the rows cost to read (bench/profile_endpoint.py refund/create).
    refunds = Refund.objects.filter(order_id=order_id).exclude(status=Refund.Status.FAILED)
    if exclude_id is not None:
        refunds = refunds.exclude(pk=exclude_id)
    return sum(refunds.values_list("amount", flat=True))


# --- create -------------------------------------------------------------------------------------------------


def refund_create(*, merchant: Merchant, mch_refund_no: str, amount: int, reason: str = "",
                  mch_order_no: str | None = None, platform_order_no: str | None = None) -> Refund:
    """POST /refund/create after the format checks: the order (2002), a used mch_refund_no (replay or 2001), then,
    under the pay-in's row lock, the order paid and its channel taking refunds (2007), the amount within what is
    still refundable (2008), and the hold from available (2003), in one transaction with the refund's INSERT
    (docs/api.md, "Refunds"). The returned refund carries `refunded_total` and `refundable` of its order."""
    order = collection_order_for_merchant(merchant_id=merchant.pk, platform_order_no=platform_order_no,
                                          mch_order_no=mch_order_no)
    if order is None:
        raise DomainError(ErrorCode.ORDER_NOT_FOUND, "collection order not found.")
    request = {"order": order.pk, "amount": amount, "reason": reason}

    def replay(existing: Refund) -> Refund:
        stored = {"order": existing.order_id, "amount": existing.amount, "reason": existing.reason}
        different = sorted(field for field, value in stored.items() if request[field] != value)
        if different:
            raise DomainError(ErrorCode.DUPLICATE_ORDER, f"mch_refund_no {existing.mch_refund_no} was already used "
                                                         f"with a different {', '.join(different)}.")
        return refund_with_totals(existing)

    return order_create_or_replay(
        lookup=lambda: refund_for_merchant(merchant_id=merchant.pk, mch_refund_no=mch_refund_no),
        replay=replay,
        create=lambda: _refund_insert(merchant=merchant, order=order, mch_refund_no=mch_refund_no, amount=amount,
                                      reason=reason))


def refund_with_totals(refund: Refund) -> Refund:
    """The refund with its order's `refunded_total` and `refundable` as they are now (the API's answer)."""
    refund.refunded_total = refunded_total(order_id=refund.order_id)
    refund.refundable = refund.order.amount - refund.refunded_total
    return refund


def _channel_refusal(order: CollectionOrder, *, taken: PaymentTaken, amount: int, refunded_before: int) -> str:
    """Why the channel that took the payment cannot take this refund now, or "" when it can (its adapter, then its
    refund rules)."""
    channel = taken.channel
    try:
        adapter = payin_adapter(channel)
    except ChannelNotAllowed as exc:
        return str(exc)
    if not getattr(adapter, "takes_refunds", False):
        return f"channel {channel.code} does not take refunds."
    return refund_refusal(order=order, taken=taken, adapter=adapter, amount=amount, refunded_before=refunded_before,
                          now=timezone.now())


def _order_refusal(order: CollectionOrder, *, taken: PaymentTaken, amount: int,
                   refunded_before: int) -> DomainError | None:
    """The order's own refusal of a refund of `amount` through the channel that took the payment (2007 not
    paid or the channel refuses, 2008 more than is still refundable), None when it takes it."""
    if order.status != CollectionOrder.Status.SUCCESS:
        return DomainError(ErrorCode.ORDER_NOT_REFUNDABLE, f"order {order.mch_order_no} is {order.status}, not paid: "
                                                           f"only a paid pay-in can be refunded.")
    refusal = _channel_refusal(order, taken=taken, amount=amount, refunded_before=refunded_before)
    if refusal:
        return DomainError(ErrorCode.ORDER_NOT_REFUNDABLE, f"order {order.mch_order_no} cannot be refunded: {refusal}")
    refundable = order.amount - refunded_before
    if amount > refundable:
        return DomainError(ErrorCode.REFUND_EXCEEDS_REFUNDABLE,
                           f"amount {amount} exceeds the {refundable} still refundable of order {order.mch_order_no} "
                           f"(paid {order.amount}, refunded or being refunded {refunded_before}).")
    return None


def refund_refusal_now(*, order: CollectionOrder, amount: int) -> DomainError | None:
    """What refund_create would refuse for this refund now (2007, 2008, then 2003), without a lock and without
    creating anything: for a page that asks before a refund is made (the portal's request). refund_create decides
    again under the pay-in's row lock."""
    if refusal := _order_refusal(order, taken=payment_taken(order=order), amount=amount,
                                 refunded_before=refunded_total(order_id=order.pk)):
        return refusal
    available = ledger_selectors.merchant_balances(merchant_id=order.merchant_id,
                                                   currency=order.currency_id)[AccountKind.AVAILABLE]
    if amount > available:
        return DomainError(ErrorCode.INSUFFICIENT_BALANCE,
                           f"available balance {available} {order.currency_id} does not cover the refund of {amount}.")
    return None


@retry_conflicts
@transaction.atomic(durable=True)
def _refund_insert(*, merchant: Merchant, order: CollectionOrder, mch_refund_no: str, amount: int,
                   reason: str) -> Refund:
    refund = Refund(merchant=merchant, order_id=order.pk, mch_refund_no=mch_refund_no, channel_id=order.channel_id,
                    currency_id=order.currency_id, amount=amount, reason=reason)
    # The row first: its INSERT claims (merchant, mch_refund_no) before any lock. A replay fails here on the unique
    # constraint holding no money lock and is answered from the stored refund.
    refund.save(force_insert=True)
    # The pay-in's row lock serializes every refund of the order: the sum below and the hold are decided by one
    # transaction at a time, so refunds from the API and the portal at once never exceed what was paid.
    order = lock_collection_order(order_id=order.pk)
    earlier = refunded_total(order_id=order.pk, exclude_id=refund.pk)
    # The refund goes back through the channel that took the payment, whatever the routing says now.
    taken = payment_taken(order=order)
    refund.channel = taken.channel
    if refusal := _order_refusal(order, taken=taken, amount=amount, refunded_before=earlier):
        raise refusal
    refundable = order.amount - earlier
    refund.hold = ledger.hold_place(merchant_id=merchant.pk, currency=order.currency_id, amount=amount,
                                    cause=refund.refund_no,
                                    memo=f"refund {refund.refund_no} ({mch_refund_no}) of order {order.mch_order_no}")
    refund.save(update_fields=["hold", "channel", "updated_at"])
    refund.order = order
    refund.refunded_total = earlier + amount
    refund.refundable = refundable - amount
    refund_id = refund.pk
    transaction.on_commit(lambda: refund_submit_dispatch(refund_id=refund_id))
    logger.info("refund %s of %s created: %s %s", refund.refund_no, order.platform_order_no, amount,
                order.currency_id)
    return refund


# --- submission to the channel --------------------------------------------------------------------------------


def refund_submit_dispatch(*, refund_id: int) -> None:
    """After commit: hand the refund to its channel in a task. A broker outage is logged; the sweep hands it again."""
    from apps.collection.tasks import submit_refund  # the tasks import this module

    try:
        submit_refund.delay(refund_id)
    except Exception as exc:  # noqa: BLE001 - broker down: the refund stays PROCESSING; the sweep submits it
        logger.warning("refund %s not queued for submission (%s); the sweep will", refund_id, type(exc).__name__)


def refund_submit(*, refund_id: int) -> str | None:
    """Hand a PROCESSING refund to the channel that took its payment, once: one worker at a time per refund (the
    submission lease), and never a refund that already has its upstream reference (the task redelivered, or the
    sweep's turn). A refusal fails the refund (its hold goes back); an unavailable channel leaves it for the sweep,
    which looks it up before anything is sent again. Returns the upstream reference, None when nothing was
    submitted."""
    refund = Refund.objects.select_related("channel", "order").filter(pk=refund_id).first()
    if refund is None or refund.status != Refund.Status.PROCESSING or refund.upstream_reference:
        return None
    try:
        adapter = payin_adapter(refund.channel)
        with one_submission_at_a_time(f"refund:{refund.refund_no}", calls=adapter.refund_calls, wait=False):
            refund.refresh_from_db(fields=["status", "upstream_reference"])
            if refund.status != Refund.Status.PROCESSING or refund.upstream_reference:
                return None
            reference = adapter.start_refund(refund=refund)
            Refund.objects.filter(pk=refund.pk, upstream_reference="").update(upstream_reference=reference,
                                                                              updated_at=timezone.now())
    except ChannelNotAllowed as exc:  # a sandbox channel in a live deployment or the reverse: an operator's case
        logger.error("refund %s not submitted: %s", refund.refund_no, exc)
        return None
    except UpstreamRejected as exc:
        refund_channel_result(refund_no=refund.refund_no, outcome=OUTCOME_FAILED, fail_reason=str(exc))
        return None
    except UpstreamUnavailable as exc:
        logger.warning("refund %s not submitted (%s); the sweep looks it up and tries again", refund.refund_no, exc)
        return None
    return reference


# --- the channel's answer -----------------------------------------------------------------------------------------


def lock_refund(*, refund_no: str) -> Refund:
    """The refund row, locked for the rest of the transaction, before its hold and any ledger row."""
    refund = (Refund.objects.select_for_update(of=("self",)).select_related("merchant", "order")
              .filter(refund_no=refund_no).first())
    if refund is None:
        raise RefundNotFound(f"no refund {refund_no}")
    return refund


# Upstream answers on a refund whose amount or currency is not the refund's: never applied (docs/channels.md,
# "A refund answer of another amount"); the refund waits in the stuck list for an operator.
REFUND_AMOUNT_MISMATCHES = Counter("payments_refund_amount_mismatches",
                                   "Upstream refund answers whose amount or currency differ from the refund's, not "
                                   "applied.", ["adapter"])


@retry_conflicts
@transaction.atomic(durable=True)
def refund_channel_result(*, refund_no: str, outcome: str, fail_reason: str = "", upstream_reference: str = "",
                          amount: int | None = None, currency: str = "") -> Refund:
    """The channel's final answer on a refund, once: SUCCESS lets the held amount leave to the channel, FAILED gives
    it back to available; either way the refund callback is written to the outbox. A second answer changes nothing.
    An answer whose `amount` (when the upstream says one) or currency is not the refund's changes nothing either: it
    is logged and counted, and the refund stays PROCESSING for an operator."""
    refund = lock_refund(refund_no=refund_no)
    if amount is not None and (amount, currency) != (refund.amount, refund.currency_id):
        adapter = refund.channel.adapter
        REFUND_AMOUNT_MISMATCHES.labels(adapter).inc()
        logger.error("refund %s is %s %s; %s refund %s says %s %s (%s): nothing applied, an operator must look",
                     refund_no, refund.amount, refund.currency_id, adapter, upstream_reference or "?", amount,
                     currency, outcome)
        return refund
    if refund.status != Refund.Status.PROCESSING:
        if (outcome == OUTCOME_SUCCEEDED) != (refund.status == Refund.Status.SUCCESS):
            logger.error("refund %s is %s; the channel now says %s: nothing changed, look at it", refund_no,
                         refund.status, outcome)
        return refund
    memo = f"refund {refund.refund_no} ({refund.mch_refund_no}) of order {refund.order.mch_order_no}"
    if outcome == OUTCOME_SUCCEEDED:
        refund.succeed(upstream_reference=upstream_reference)
        refund.save(update_fields=["status", "upstream_reference", "finished_at", "updated_at"])
        ledger.hold_settle(hold_id=refund.hold_id, destinations=[ledger.Leg(AccountKind.PAYIN_CLEARING,
                                                                            refund.amount)], memo=f"{memo} paid")
    elif outcome == OUTCOME_FAILED:
        refund.fail(reason=fail_reason or "refused by the channel")
        refund.save(update_fields=["status", "fail_reason", "finished_at", "updated_at"])
        ledger.hold_release(hold_id=refund.hold_id, memo=f"{memo} failed")
    else:
        raise ValueError(f"unknown refund outcome {outcome!r}")
    callback_enqueue(merchant=refund.merchant, type=CallbackEvent.Type.REFUND_TERMINAL,
                     platform_order_no=refund.refund_no, payload=refund_terminal_payload(refund))
    logger.info("refund %s %s", refund.refund_no, refund.status)
    return refund


# --- the sweep ------------------------------------------------------------------------------------------------------

# A refund is submitted on commit and a sandbox one answered SANDBOX_REFUND_SETTLE_SECONDS later; one still PROCESSING
# this long after its create lost its submission or its answer.
REFUND_SWEEP_GRACE = timedelta(seconds=30)
REFUND_SWEEP_LIMIT = 200


def refunds_waiting(*, before: datetime):
    """PROCESSING refunds created before `before`, oldest first (the partial index refund_processing_idx)."""
    return Refund.objects.filter(status=Refund.Status.PROCESSING, created_at__lt=before).order_by("created_at")


def refunds_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Finish refunds whose submission or answer was lost. Each is first looked up at its channel by our refund_no: a
    final answer is applied through refund_channel_result, a pending one keeps waiting (its reference recorded), and
    only one the channel says it does not have ('missing') is submitted again; a refund whose submission timed out may
    have arrived, so it is never sent blind. Returns how many of each it handled."""
    now = now or timezone.now()
    handled = {"refund.unsubmitted": 0, "refund.unanswered": 0}
    for refund in refunds_waiting(before=now - REFUND_SWEEP_GRACE).select_related("channel", "order")[
            :REFUND_SWEEP_LIMIT]:
        try:
            state = payin_adapter(refund.channel).refund_state(refund=refund)
        except (UpstreamUnavailable, NotImplementedError, ChannelNotAllowed) as exc:
            logger.warning("refund %s: its channel could not say what became of it (%s)", refund.refund_no, exc)
            continue
        if state.outcome == "missing":
            refund_submit(refund_id=refund.pk)
            handled["refund.unsubmitted"] += 1
        elif state.outcome in (OUTCOME_SUCCEEDED, OUTCOME_FAILED):
            refund_channel_result(refund_no=refund.refund_no, outcome=state.outcome, fail_reason=state.fail_reason,
                                  upstream_reference=state.reference, amount=state.amount, currency=state.currency)
            handled["refund.unanswered"] += 1
        elif state.reference and not refund.upstream_reference:
            Refund.objects.filter(pk=refund.pk, upstream_reference="").update(upstream_reference=state.reference,
                                                                              updated_at=timezone.now())
    if any(handled.values()):
        logger.warning("refund sweep: %s", handled)
    return {kind: count for kind, count in handled.items() if count}
