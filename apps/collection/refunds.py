"""Refunds of paid pay-ins (docs/api.md, "Refunds"): create, the submission to the pay-in's channel, the channel's
answer.

Money: create holds `amount` (available → frozen) in the transaction that inserts the refund; SUCCESS lets the held
amount leave to the channel (pay-in clearing, the account the payment came in through); FAILED gives it back to
available. Never from settling. Lock order (docs/ledger.md, "Lock order and retries"): the pay-in's row (its lookup,
which serializes the refunds of the order as the payee's lock does a payee's payouts), the refund's key (its
INSERT), then the merchant's accounts inside the ledger; the answer locks the refund row, its hold, then the
accounts. Callbacks are outbox rows of the same transaction; the channel is called after commit, by a drain a wake
mark queues.
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
from apps.channels.refund_rules import PaymentTaken, payment_taken, payment_taken_of, refund_refusal
from apps.channels.submission import one_submission_at_a_time
from apps.channels.registry import payin_adapter
from apps.collection.models import CollectionOrder, Refund
from apps.collection.selectors import refund_for_merchant
from apps.collection.services import lock_merchant_order
from apps.common.errors import DomainError, ErrorCode
from apps.common.models import mark_saved
from apps.common.orders import order_create_or_replay
from apps.common.retry import retry_conflicts
from apps.common.wake import Drain
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


class _OrderNotFound(LookupError):
    """refund/create's order does not exist for the merchant: 2002, before anything about its mch_refund_no."""


def refund_create(*, merchant: Merchant, mch_refund_no: str, amount: int, reason: str = "",
                  mch_order_no: str | None = None, platform_order_no: str | None = None) -> Refund:
    """POST /refund/create after the format checks: the order (2002), a used mch_refund_no (replay or 2001), then,
    under the pay-in's row lock, the order paid and its channel taking refunds (2007), the amount within what is
    still refundable (2008), and the hold from available (2003), in one transaction with the refund's INSERT
    (docs/api.md, "Refunds"). The returned refund carries `refunded_total` and `refundable` of its order."""
    key = ("platform_order_no", platform_order_no) if platform_order_no else ("mch_order_no", mch_order_no)
    request = {"order": key[1], "amount": amount, "reason": reason}

    def create() -> Refund:
        refund = _refund_insert(merchant=merchant, mch_refund_no=mch_refund_no, amount=amount, reason=reason,
                                mch_order_no=mch_order_no, platform_order_no=platform_order_no)
        # Logged after COMMIT: not while the merchant's balance rows are locked.
        logger.info("refund %s of %s created: %s %s", refund.refund_no, refund.order.platform_order_no, amount,
                    refund.currency_id)
        return refund

    def replay(existing: Refund) -> Refund:
        # The request's order by the key it was named by: the refunds of one mch_refund_no are the merchant's.
        stored = {"order": getattr(existing.order, key[0]), "amount": existing.amount, "reason": existing.reason}
        different = sorted(field for field, value in stored.items() if request[field] != value)
        if different:
            raise DomainError(ErrorCode.DUPLICATE_ORDER, f"mch_refund_no {existing.mch_refund_no} was already used "
                                                         f"with a different {', '.join(different)}.")
        return refund_with_totals(existing)

    try:
        return order_create_or_replay(
            lookup=lambda: refund_for_merchant(merchant_id=merchant.pk, mch_refund_no=mch_refund_no),
            replay=replay, create=create)
    except _OrderNotFound:
        raise DomainError(ErrorCode.ORDER_NOT_FOUND, "collection order not found.") from None


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


# What refund/create decides on, read in one statement right after the pay-in's row lock: the order's refunds not
# FAILED (summed) and where and how the payer paid (its upstream payment's channel and method; none for the sandbox).
# Read after the lock, in a statement of its own, so a refund committed by a transaction this one waited for is in
# the sum (the lock's own statement sees the rows of before its wait). The sum's and the payment's two ORM queries took
# 2.2 ms of CPU, this one 0.32 ms (micro, alternated in one process; docs/performance.md, "Measured changes").
_REFUND_BASIS = (
    'SELECT (SELECT COALESCE(SUM("amount"), 0)::bigint FROM "collection_refund" WHERE "order_id" = %s AND '
    '"status" <> %s), "channel_id", "payment_method" FROM (VALUES (1)) AS "one" '
    'LEFT JOIN "channels_upstreampayin" ON "platform_order_no" = %s')


def _refund_basis(order: CollectionOrder) -> tuple[int, PaymentTaken]:
    """The order's refunded total (its refunds not FAILED) and its PaymentTaken, read under its row lock."""
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(_REFUND_BASIS, [order.pk, Refund.Status.FAILED.value, order.platform_order_no])
        refunded, channel_id, method = cursor.fetchone()
    return refunded, payment_taken_of(order=order, opened=None if channel_id is None else (channel_id, method))


# The refund's INSERT, written by hand as a payout's (docs/architecture.md, "Where SQL is written by hand"): `save()`
# compiled and prepared every column one by one: 0.69 ms of CPU against 0.41 ms (micro, alternated), 8 % of
# refund/create's. The columns left out are NULL on a new
# refund (finished_at, submitted_at), and hold_id takes its database default, the hold's id drawn here (NextHoldId),
# returned with the primary key. tests/collection/test_refund_api.py holds this list to the model's fields.
_REFUND_INSERT = (
    'INSERT INTO "collection_refund" ("merchant_id", "order_id", "refund_no", "mch_refund_no", "channel_id", '
    '"currency_id", "amount", "reason", "status", "upstream_reference", "fail_reason", "created_at", "updated_at") '
    'VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING "id", "hold_id"')


def _refund_insert_row(refund: Refund) -> None:
    """INSERT the new refund (unsaved `refund`) and set its id and its hold's id from the row; an IntegrityError as
    from `save()` (a used mch_refund_no)."""
    refund.created_at = refund.updated_at = timezone.now()
    connection = transaction.get_connection()
    with connection.cursor() as cursor:
        cursor.execute(_REFUND_INSERT, [
            refund.merchant_id, refund.order_id, refund.refund_no, refund.mch_refund_no, refund.channel_id,
            refund.currency_id, refund.amount, refund.reason, str(refund.status), refund.upstream_reference,
            refund.fail_reason, refund.created_at, refund.updated_at])
        refund.pk, refund.hold_id = cursor.fetchone()
    mark_saved(refund, connection.alias)


@retry_conflicts
@transaction.atomic(durable=True)
def _refund_insert(*, merchant: Merchant, mch_refund_no: str, amount: int, reason: str, mch_order_no: str | None,
                   platform_order_no: str | None) -> Refund:
    # The order's lookup is its row lock. It serializes every refund of the order: the sum below, the checks and the
    # hold are decided by one transaction at a time, so refunds from the API and the portal at once never exceed
    # what was paid.
    order = lock_merchant_order(merchant_id=merchant.pk, platform_order_no=platform_order_no,
                                mch_order_no=mch_order_no)
    if order is None:
        raise _OrderNotFound
    earlier, taken = _refund_basis(order)
    if refusal := _order_refusal(order, taken=taken, amount=amount, refunded_before=earlier):
        raise refusal
    # The refund goes back through the channel that took the payment, whatever the routing says now.
    refund = Refund(merchant=merchant, order=order, mch_refund_no=mch_refund_no, channel=taken.channel,
                    currency_id=order.currency_id, amount=amount, reason=reason)
    # The row before the hold: its INSERT claims (merchant, mch_refund_no) before any ledger lock, so a replay fails
    # here on the unique constraint holding the pay-in's row but no balance, and is answered from the stored refund.
    # The INSERT also draws the hold's id; the hold is placed under it, the last statement before COMMIT.
    _refund_insert_row(refund)
    refund.hold = ledger.hold_place(merchant_id=merchant.pk, currency=order.currency_id, amount=amount,
                                    cause=refund.refund_no, hold_id=refund.hold_id,
                                    memo=f"refund {refund.refund_no} ({mch_refund_no}) of order {order.mch_order_no}")
    refund.refunded_total = earlier + amount
    refund.refundable = order.amount - refund.refunded_total
    transaction.on_commit(refund_submit_wake)
    return refund


# --- submission to the channel --------------------------------------------------------------------------------

# The submission's drain (apps.common.wake.Drain), as the payouts': after a refund commits, a drain (submit_refunds)
# is queued only when its mark was free; every drain releases it, then takes every refund not yet submitted. No
# broker message per refund on the request path (a Celery publish took 1.24 ms of CPU, the mark's one Redis script
# 0.75 ms: micro, alternated; docs/performance.md). The sweep submits what a lost drain left after REFUND_SWEEP_GRACE.
REFUND_SUBMISSION = Drain(what="refund submission", key="refund:submit:wake",
                          task="apps.collection.tasks.submit_refunds")
REFUND_SUBMIT_WAKE_KEYS = REFUND_SUBMISSION.keys


def refund_submit_wake() -> None:
    """After a refund's commit: queue a drain unless a queued one has yet to look (the mark is set)."""
    REFUND_SUBMISSION.wake()


def refund_submit_drain() -> int:
    """Hand every refund not yet submitted that no other drain holds to its channel, one at a time
    (REFUND_SUBMISSION.run); how many it took."""
    return REFUND_SUBMISSION.run(_refund_take_next, _refund_send)


@retry_conflicts
@transaction.atomic(durable=True)
def _refund_take_next() -> Refund | None:
    """The oldest PROCESSING refund not yet submitted whose row no other drain holds, marked submitted and committed
    before its channel is called: two drains, or one run twice, never both send it. None when there is none."""
    refund = (Refund.objects.select_for_update(of=("self",), skip_locked=True).select_related("channel", "order")
              .filter(status=Refund.Status.PROCESSING, submitted_at__isnull=True).order_by("created_at").first())
    if refund is not None:
        refund.submitted_at = timezone.now()
        refund.save(update_fields=["submitted_at", "updated_at"])
    return refund


def refund_submit(*, refund_id: int) -> str | None:
    """Hand a PROCESSING refund to the channel that took its payment (the sweep's, for one its channel does not have),
    marked submitted first so no drain takes it too. Returns the upstream reference, None when nothing was
    submitted."""
    refund = Refund.objects.select_related("channel", "order").filter(pk=refund_id).first()
    if refund is None or refund.status != Refund.Status.PROCESSING or refund.upstream_reference:
        return None
    Refund.objects.filter(pk=refund.pk, submitted_at__isnull=True).update(submitted_at=timezone.now(),
                                                                          updated_at=timezone.now())
    return _refund_send(refund)


def _refund_send(refund: Refund) -> str | None:
    """Hand the refund to its channel, once: one worker at a time per refund (the submission lease), and never a
    refund that already has its upstream reference (the sweep's turn, or another worker's). A refusal fails the
    refund (its hold goes back); an unavailable channel leaves it for the sweep, which looks it up before anything is
    sent again. Returns the upstream reference, None when nothing was submitted."""
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
