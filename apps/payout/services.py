"""Every payout write: create (freeze), review, submission, channel result, reversal (docs/api.md, "Payout orders").

Shape of each operation (STYLE.md): one durable transaction (retried on a deadlock or serialization failure,
apps/common/retry.py) that locks the payout row, then its hold, then the merchant's accounts (the one lock order:
docs/ledger.md, "Lock order and retries"), returns early when the order is already where the call would put it,
transitions, saves, moves money through the ledger, writes the callback outbox and the audit row. Celery dispatch
and adapter calls happen after commit.
"""

import logging
from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

from apps.callbacks.models import CallbackEvent
from apps.callbacks.enqueue import callback_enqueue, payout_reversed_payload, payout_terminal_payload
from apps.channels.routing import Route, order_route
from apps.common import audit
from apps.common.independence import independence_conflict
from apps.common.locks import advisory_xact_lock
from apps.common.models import mark_saved
from apps.common.orders import order_create_or_replay, replay_or_conflict
from apps.common.retry import retry_conflicts
from apps.common.wake import Drain
from apps.ledger import services as ledger
from apps.ledger.models import AccountKind
from apps.merchants.models import Merchant, Product
from apps.payout.models import Payout, PayoutApproval, mask_account
from apps.payout.selectors import payout_for_merchant, payout_risk_reasons, payout_velocity_reason

logger = logging.getLogger(__name__)

REVIEW_PERMISSION = "payout.review_payout"
REVERSE_PERMISSION = "payout.reverse_payout"
# A PROCESSING order without an upstream reference after this long is handed to the adapter again
# (adapters treat platform_order_no as their idempotency key).
RESUBMIT_AFTER = timedelta(seconds=60)


class PayoutActionRefused(ValueError):
    """The order's state, the bounds or the actor's role do not allow the operation; nothing moved."""


class PayoutNotFound(LookupError):
    pass


class DecisionOutcome:
    """What one review call did, decided under the payout's row lock (set as `payout.outcome` on the payout
    payout_approve / payout_reject return): two reviewers at the same moment are never both told they approved."""

    APPROVED = "approved"  # this call released the payout (APPROVED, submitted after commit)
    RECORDED = "recorded"  # this call's approval is recorded; a second reviewer must approve (four eyes)
    REJECTED = "rejected"  # this call rejected it; the freeze went back
    UNCHANGED = "unchanged"  # decided before (by this call's decision or another reviewer's): nothing changed


def lock_payout(*, payout_id: int | None = None, platform_order_no: str | None = None) -> Payout:
    """The payout row, locked for the rest of the transaction. Always locked before any ledger row."""
    payouts = Payout.objects.select_for_update(of=("self",)).select_related("merchant", "channel")
    payout = (payouts.filter(pk=payout_id) if payout_id is not None
              else payouts.filter(platform_order_no=platform_order_no)).first()
    if payout is None:
        raise PayoutNotFound(f"no payout {platform_order_no or payout_id}")
    return payout


def _actor_label(actor, via: str) -> str | None:
    return None if getattr(actor, "pk", None) else via


# --- create -------------------------------------------------------------------------------------------


def payout_create(*, merchant: Merchant, mch_order_no: str, product_code: str, amount: int, currency: str,
                  payee_name: str, payee_account: str, bank_code: str, attach: str = "") -> Payout:
    """POST /payout/create after the format checks: replay or 2001, then 1001 → 1002 → 1003 → 2006 → 2003
    (docs/api.md, "Checks, in order"), then the freeze and the order in one transaction. Returns the new or replayed
    order."""
    request = {"product_code": product_code, "amount": amount, "currency": currency, "payee_name": payee_name,
               "payee_account": payee_account, "bank_code": bank_code, "attach": attach}

    def create() -> Payout:
        route = order_route(merchant_id=merchant.pk, kind=Product.Kind.PAYOUT, currency=currency,
                            product_code=product_code, amount=amount, bank_code=bank_code)  # 2006 checked there
        payout = _payout_insert(merchant=merchant, route=route, mch_order_no=mch_order_no, amount=amount,
                                payee_name=payee_name, payee_account=payee_account, bank_code=bank_code,
                                attach=attach)
        # Logged after COMMIT: not while the merchant's balance rows are locked (every create of the merchant waits
        # for them), and only for an order that was committed.
        logger.info("payout %s created %s: %s %s to %s", payout.platform_order_no, payout.status, amount, currency,
                    payout.masked_payee_account)
        return payout

    return order_create_or_replay(
        lookup=lambda: payout_for_merchant(merchant_id=merchant.pk, mch_order_no=mch_order_no),
        replay=lambda existing: _replay(existing, request), create=create)


def _replay(existing: Payout, request: dict) -> Payout:
    stored = {"product_code": existing.product.code, "amount": existing.amount, "currency": existing.currency_id,
              "payee_name": existing.payee_name, "payee_account": existing.payee_account,
              "bank_code": existing.bank_code, "attach": existing.attach}
    return replay_or_conflict(existing, stored=stored, request=request)


# The velocity rule counts the merchant's payouts to a payee account; two creates to the same account must not
# both count before either commits. No row stands for a payee account, so the lock is a transaction-scoped
# advisory lock on (merchant, payee account) (apps.common.locks).
def _lock_payee_account(*, merchant_id: int, payee_account: str) -> None:
    advisory_xact_lock(f"payout-payee:{merchant_id}:{payee_account}")


# The new order's INSERT, written by hand (docs/performance.md, "Measured changes"): `save(force_insert=True)`
# prepared and compiled all 32 columns one by one on every create; by hand, payout/create's app CPU is 0.38 ms
# (9 %) lower, interleaved request by request in one process. The columns left out are NULL on a new
# order (review, submission, result, reversal, requested_by: set later through the ORM), and hold_id takes its
# database default, the hold's id drawn here (NextHoldId), returned with the primary key.
# tests/payout/test_create_api.py pins this list to the model: a field added to Payout fails there until written here.
_PAYOUT_INSERT = (
    'INSERT INTO "payout_payout" ("merchant_id", "platform_order_no", "mch_order_no", "product_id", "currency_id", '
    '"channel_id", "route_reason", "amount", "fee", "payee_name", "payee_account", "bank_code", "attach", "status", '
    '"review_required", "approvals_required", "risk_reasons", "review_reason", "upstream_reference", "fail_reason", '
    '"created_at", "updated_at") VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, '
    '%s, %s, %s) RETURNING "id", "hold_id"')


def _payout_insert_row(payout: Payout) -> None:
    """INSERT the new order (unsaved `payout`) and set its id and its hold's id from the row."""
    with connection.cursor() as cursor:
        cursor.execute(_PAYOUT_INSERT, [
            payout.merchant_id, payout.platform_order_no, payout.mch_order_no, payout.product_id, payout.currency_id,
            payout.channel_id, payout.route_reason, payout.amount, payout.fee, payout.payee_name, payout.payee_account,
            payout.bank_code, payout.attach, payout.status, payout.review_required, payout.approvals_required,
            connection.ops.adapt_json_value(payout.risk_reasons, None), payout.review_reason,
            payout.upstream_reference, payout.fail_reason, payout.created_at, payout.updated_at])
        payout.pk, payout.hold_id = cursor.fetchone()
    mark_saved(payout, connection.alias)


@retry_conflicts
@transaction.atomic(durable=True)
def _payout_insert(*, merchant: Merchant, route: Route, mch_order_no: str, amount: int, payee_name: str,
                   payee_account: str, bank_code: str, attach: str) -> Payout:
    """Risk rules, the order (claiming its mch_order_no), then the freeze of amount + fee (2003 when available is
    short), in one transaction."""
    currency = route.merchant_currency.currency
    _lock_payee_account(merchant_id=merchant.pk, payee_account=payee_account)
    merchant_currency = route.merchant_currency
    reasons = payout_risk_reasons(currency=currency, amount=amount,
                                  review_threshold=merchant_currency.payout_review_threshold,
                                  payee_account=payee_account,
                                  dual_approval_threshold=merchant_currency.payout_dual_approval_threshold)
    velocity = payout_velocity_reason(merchant_id=merchant.pk, payee_account=payee_account)
    if velocity:
        reasons.append(velocity)
    fee = route.product.fee_for(amount)
    approvals_required = 2 if amount >= merchant_currency.payout_dual_approval_threshold else 1
    now = timezone.now()
    payout = Payout(merchant=merchant, mch_order_no=mch_order_no, product=route.product, currency=currency,
                    channel=route.channel, route_reason=route.reason, amount=amount, fee=fee,
                    payee_name=payee_name, payee_account=payee_account,
                    bank_code=bank_code, attach=attach, review_required=bool(reasons), risk_reasons=reasons,
                    approvals_required=approvals_required,
                    status=Payout.Status.FROZEN if reasons else Payout.Status.APPROVED, created_at=now,
                    updated_at=now)
    # The row first: its INSERT claims (merchant, mch_order_no) before any ledger lock. A replay fails here on the
    # unique constraint holding no money lock (it may wait for a transaction that holds the existing order's row,
    # never the other way round) and is answered from the stored order (docs/ledger.md, "Lock order and retries").
    # The INSERT also draws the hold's id (Payout.hold's default, returned with the pk); the hold is placed under it.
    _payout_insert_row(payout)
    payout.hold = ledger.hold_place(merchant_id=merchant.pk, currency=currency.code, amount=amount + fee,
                                    cause=payout.platform_order_no, memo=f"payout {mch_order_no}",
                                    hold_id=payout.hold_id)
    # No audit row: the merchant's create is the order row itself (who: its merchant; when: created_at; what: its
    # amount, fee, payee, risk reasons and first status), and the decision trail shows it from there
    # (payout_decisions; docs/payouts.md).
    if payout.status == Payout.Status.APPROVED:
        transaction.on_commit(payout_submit_wake)
    return payout


# --- review ---------------------------------------------------------------------------------------------


def _check_reviewer(payout: Payout, reviewer) -> None:
    """Who may decide this payout at all: a risk reviewer who neither administers its merchant nor asked for it, nor
    is one person with whoever asked for it (docs/staff-access.md, "Independence"). The CLI (no user: a shell on the
    server is the highest authority, docs/api.md, "Operations CLI") is not checked."""
    if not getattr(reviewer, "pk", None):
        return
    if not reviewer.has_perm(REVIEW_PERMISSION):
        raise PayoutActionRefused(f"{reviewer.get_username()} may not review payouts.")
    if payout.merchant.administrators.filter(pk=reviewer.pk).exists():
        raise PayoutActionRefused(f"{reviewer.get_username()} administers merchant {payout.merchant.merchant_no} "
                                  f"and may not review its payouts.")
    if payout.requested_by_id == reviewer.pk:
        raise PayoutActionRefused(f"{reviewer.get_username()} asked for payout {payout} and may not decide it.")
    if payout.requested_by_id and (conflict := independence_conflict(payout.requested_by, reviewer)):
        raise PayoutActionRefused(f"{conflict}. {reviewer.get_username()} may not decide payout {payout}, which "
                                  f"{payout.requested_by.get_username()} asked for.")


def _refuse_unless_frozen(payout: Payout) -> None:
    """For a caller that must know it made the decision itself (review_payout, docs/api.md, "Operations CLI"): checked
    under the row lock, so a decision made concurrently (an admin at the same moment) is refused, not replayed."""
    if payout.status != Payout.Status.FROZEN:
        raise PayoutActionRefused(f"payout {payout} is {payout.status}, not FROZEN; nothing changed.")


def _decision_row(payout: Payout, reviewer, *, decision: str, reason: str, label: str) -> PayoutApproval:
    """The reviewer's one decision on this payout; a second decision by the same reviewer is refused (the
    unique (payout, reviewer) constraint backs this check, which runs under the payout's row lock). An approval
    counts towards the two a large payout needs only from a second person: a reviewer who is one person with an
    earlier approver (one made, reset or vouched for the other, or a third account controls both) is refused
    (docs/staff-access.md, "Independence")."""
    user = reviewer if getattr(reviewer, "pk", None) else None
    if user is not None:
        earlier = payout.approvals.filter(reviewer=user).first()
        if earlier is not None:
            raise PayoutActionRefused(
                f"{user.get_username()} already decided payout {payout} ({earlier.get_decision_display().lower()}); "
                f"a different reviewer must give the next decision.")
        if decision == PayoutApproval.Decision.APPROVE:
            for approval in payout.approvals.filter(decision=decision, reviewer__isnull=False).select_related(
                    "reviewer"):
                if conflict := independence_conflict(approval.reviewer, user):
                    raise PayoutActionRefused(
                        f"{conflict}. Payout {payout} needs two independent people's approvals; "
                        f"{user.get_username()} cannot give the second one after {approval.reviewer.get_username()}.")
    return PayoutApproval.objects.create(payout=payout, reviewer=user, actor_label=label, decision=decision,
                                         reason=reason)


def _label(reviewer, via: str) -> str:
    return reviewer.get_username() if getattr(reviewer, "pk", None) else audit.cli_label(via)


@retry_conflicts
@transaction.atomic(durable=True)
def payout_approve(*, payout_id: int, reviewer, reason: str = "", via: str = "admin",
                   replay: bool = True) -> Payout:
    """A reviewer's approval of a FROZEN payout (reason required). A payout needing one approval becomes
    APPROVED and is submitted to the channel (after commit); one needing two (four eyes) stays FROZEN until a
    second, different reviewer approves. The CLI (no reviewer) approves alone, reason optional.
    `replay=False`: an order already decided is refused instead of returned as it is.
    Decided under the row lock; the returned payout's `outcome` says what this call did (APPROVED, RECORDED: one
    approval of two, UNCHANGED: approved before, by this or another reviewer), for the caller to report."""
    payout = lock_payout(payout_id=payout_id)
    _check_reviewer(payout, reviewer)
    if not replay:
        _refuse_unless_frozen(payout)
    if payout.reviewed_at and payout.status != Payout.Status.REJECTED:
        payout.outcome = DecisionOutcome.UNCHANGED
        return payout  # approved before (it may have moved on since): the same decision twice moves nothing
    if payout.status != Payout.Status.FROZEN:
        raise PayoutActionRefused(f"payout {payout} is {payout.status}; only a FROZEN payout can be approved.")
    reason = reason.strip()
    by_user = bool(getattr(reviewer, "pk", None))
    if by_user and not reason:
        raise PayoutActionRefused("a reason is required to approve a payout.")
    label = _label(reviewer, via)
    _decision_row(payout, reviewer, decision=PayoutApproval.Decision.APPROVE,
                  reason=reason or f"approved from the {via}", label=label)
    approvals = payout.approvals.filter(decision=PayoutApproval.Decision.APPROVE).count()
    if by_user and approvals < payout.approvals_required:
        audit.record(actor=reviewer, action="payout.approval", obj=payout, reason=reason,
                     old={"status": payout.status},
                     new={"status": payout.status, "approvals": f"{approvals}/{payout.approvals_required}"})
        payout.outcome = DecisionOutcome.RECORDED
        return payout  # four eyes: waits for a second reviewer
    payout.approve(reviewer=reviewer, reason=reason)
    payout.save(update_fields=["status", "reviewed_by", "reviewed_at", "review_reason", "updated_at"])
    audit.record(actor=reviewer, actor_label=None if by_user else label, action="payout.approve", obj=payout,
                 old={"status": Payout.Status.FROZEN},
                 new={"status": payout.status, "approvals": f"{approvals}/{payout.approvals_required}"},
                 reason=payout.review_reason)
    transaction.on_commit(payout_submit_wake)
    payout.outcome = DecisionOutcome.APPROVED
    return payout


@retry_conflicts
@transaction.atomic(durable=True)
def payout_reject(*, payout_id: int, reviewer, reason: str, via: str = "admin", replay: bool = True) -> Payout:
    """FROZEN → REJECTED by one risk reviewer (reason required, sent as fail_reason): the freeze goes back.
    A reviewer who already approved it may not reject it too (one decision per reviewer).
    `replay=False`: an order already decided is refused instead of returned as it is. The returned payout's
    `outcome`: REJECTED by this call, or UNCHANGED (rejected before)."""
    payout = lock_payout(payout_id=payout_id)
    _check_reviewer(payout, reviewer)
    if not replay:
        _refuse_unless_frozen(payout)
    if payout.status == Payout.Status.REJECTED:
        payout.outcome = DecisionOutcome.UNCHANGED
        return payout  # the same decision twice moves nothing
    if not reason.strip():
        raise PayoutActionRefused("a reason is required to reject a payout.")
    if payout.status != Payout.Status.FROZEN:
        raise PayoutActionRefused(f"payout {payout} is {payout.status}; only a FROZEN payout can be rejected.")
    label = _label(reviewer, via)
    _decision_row(payout, reviewer, decision=PayoutApproval.Decision.REJECT, reason=reason.strip(), label=label)
    payout.reject(reviewer=reviewer, reason=reason.strip())
    payout.save(update_fields=["status", "reviewed_by", "reviewed_at", "review_reason", "fail_reason",
                               "finished_at", "updated_at"])
    ledger.hold_release(hold_id=payout.hold_id, memo=f"payout {payout} rejected")
    _enqueue_terminal(payout)
    audit.record(actor=reviewer, actor_label=_actor_label(reviewer, label), action="payout.reject", obj=payout,
                 old={"status": Payout.Status.FROZEN}, new={"status": payout.status}, reason=payout.review_reason)
    payout.outcome = DecisionOutcome.REJECTED
    return payout


# --- disbursement ---------------------------------------------------------------------------------------


# The submission's drain (apps.common.wake.Drain): after an APPROVED payout commits, a drain
# (submit_approved_payouts) is queued only when its mark was free; every drain releases it, then submits every
# APPROVED payout it can claim (SKIP LOCKED shares them out between drains). One mark, not several as the callbacks'
# bulkhead has: a create that finds the marks set tries every one, a Redis round trip each. The sweeper queues the
# submission of what a lost drain left after SUBMIT_GRACE.
SUBMISSION = Drain(what="payout submission", key="payout:submit:wake", task="apps.payout.tasks.submit_approved_payouts")
SUBMIT_WAKE_KEYS = SUBMISSION.keys


def payout_submit_wake() -> None:
    """After the commit of an APPROVED payout: queue a drain unless a queued one has yet to look (the mark is set)."""
    SUBMISSION.wake()


def payout_submit_drain() -> int:
    """Submit every APPROVED payout no other drain holds, one at a time (SUBMISSION.run); how many it claimed."""
    return SUBMISSION.run(_payout_claim_next, lambda claimed: _payout_send_marked(*claimed))


def _payout_claim_next() -> tuple[Payout, bool] | None:
    payout, send = _payout_mark_processing()
    return None if payout is None else (payout, send)


def payout_submit_dispatch(*, payout_id: int) -> None:
    """Queue one payout's submission task (the sweeper's); a broker outage is left to the next sweep."""
    from apps.payout.tasks import submit_payout

    try:
        submit_payout.delay(payout_id)
    except Exception:  # noqa: BLE001 - broker down: the order stays APPROVED and the sweeper re-dispatches it
        logger.warning("payout %s not dispatched for submission; the sweeper will retry", payout_id)


def payout_submit(*, payout_id: int) -> Payout:
    """APPROVED → PROCESSING (committed), then hand the order to its channel adapter, outside any transaction
    (apps.payout.failover: another channel when this one definitely did not take it)."""
    payout, send = _payout_mark_processing(payout_id=payout_id)
    return _payout_send_marked(payout, send)


def _payout_send_marked(payout: Payout, send: bool) -> Payout:
    if not send:
        return payout
    from apps.payout.failover import payout_send

    # The mark just set submitted_at on a first submission; a re-submission's is older than RESUBMIT_AFTER.
    first = payout.submitted_at > timezone.now() - RESUBMIT_AFTER
    return payout_send(payout=payout, first=first)  # the channel, or the next one (docs/channels.md, "Failover")


def _lock_next_approved() -> Payout | None:
    """The oldest APPROVED payout whose row no one else holds (another drain submitting it), locked."""
    return (Payout.objects.select_for_update(of=("self",), skip_locked=True).select_related("merchant", "channel")
            .filter(status=Payout.Status.APPROVED).order_by("created_at").first())


@retry_conflicts
@transaction.atomic(durable=True)
def _payout_mark_processing(*, payout_id: int | None = None) -> tuple[Payout | None, bool]:
    """`payout_id` None: the next APPROVED payout (a drain), (None, False) when there is none."""
    payout = lock_payout(payout_id=payout_id) if payout_id is not None else _lock_next_approved()
    if payout is None:
        return None, False
    if payout.status == Payout.Status.PROCESSING:
        # Submitted before; send again only if the adapter never acknowledged it (lost worker, upstream down).
        stale = not payout.upstream_reference and payout.submitted_at < timezone.now() - RESUBMIT_AFTER
        return payout, stale
    if payout.status != Payout.Status.APPROVED:
        return payout, False  # in review or finished: nothing to submit
    payout.submit()
    payout.save(update_fields=["status", "submitted_at", "updated_at"])
    audit.record(actor=None, actor_label="system", action="payout.submit", obj=payout,
                 old={"status": Payout.Status.APPROVED}, new={"status": payout.status, "channel": payout.channel.code})
    return payout, True


@retry_conflicts
@transaction.atomic(durable=True)
def payout_channel_result(*, platform_order_no: str, outcome: str, fail_reason: str = "") -> Payout:
    """The channel's asynchronous result: 'paid' → SUCCESS (frozen leaves: amount to payout clearing, fee to
    revenue) or 'failed' → FAILED (frozen back to available); terminal callback. Duplicates are harmless."""
    if outcome not in ("paid", "failed"):
        raise ValueError(f"unknown channel outcome {outcome!r}")
    payout = lock_payout(platform_order_no=platform_order_no)
    target = Payout.Status.SUCCESS if outcome == "paid" else Payout.Status.FAILED
    if payout.status == target:
        return payout  # the channel repeated itself
    return payout_channel_result_locked(payout, outcome=outcome, fail_reason=fail_reason)


def payout_channel_result_locked(payout: Payout, *, outcome: str, fail_reason: str = "") -> Payout:
    """PROCESSING → SUCCESS / FAILED with its ledger movement, on a payout the caller has locked (lock_payout) in
    its durable transaction: payout_channel_result, and payout_upstream_apply, which decides under the same lock."""
    if payout.status != Payout.Status.PROCESSING:
        raise PayoutActionRefused(f"payout {payout} is {payout.status}; a channel result '{outcome}' "
                                  f"applies only to a PROCESSING payout.")
    if outcome == "paid":
        payout.mark_paid()
        payout.save(update_fields=["status", "finished_at", "updated_at"])
        destinations = [ledger.Leg(AccountKind.PAYOUT_CLEARING, payout.amount)]
        if payout.fee:
            destinations.append(ledger.Leg(AccountKind.FEE_REVENUE, payout.fee))
        ledger.hold_settle(hold_id=payout.hold_id, destinations=destinations, memo=f"payout {payout} paid")
    else:
        payout.mark_failed(fail_reason=fail_reason.strip() or "failed upstream")
        payout.save(update_fields=["status", "fail_reason", "finished_at", "updated_at"])
        ledger.hold_release(hold_id=payout.hold_id, memo=f"payout {payout} failed")
    _enqueue_terminal(payout)
    audit.record(actor=None, actor_label=f"channel {payout.channel.code}", action=f"payout.{outcome}", obj=payout,
                 old={"status": Payout.Status.PROCESSING}, new={"status": payout.status},
                 reason=payout.fail_reason)
    logger.info("payout %s %s (%s)", payout, payout.status, payout.masked_payee_account)
    return payout


def _enqueue_terminal(payout: Payout) -> None:
    callback_enqueue(merchant=payout.merchant, type=CallbackEvent.Type.PAYOUT_TERMINAL,
                     platform_order_no=payout.platform_order_no, payload=payout_terminal_payload(payout))


# --- reversal -------------------------------------------------------------------------------------------


@retry_conflicts
@transaction.atomic(durable=True)
def payout_reverse(*, reversal_amount: int, fee_refund: int, actor=None, source: str = "ops", reason: str = "",
                   payout_id: int | None = None, platform_order_no: str | None = None) -> Payout:
    """Ops reversal of a SUCCESS payout (reverse_payout CLI; in the admin an approved staff request): at most
    once, within the bounds of docs/api.md, "Payout orders"; reversing twice is refused."""
    return payout_reverse_in_transaction(reversal_amount=reversal_amount, fee_refund=fee_refund, actor=actor,
                                         source=source, reason=reason, payout_id=payout_id,
                                         platform_order_no=platform_order_no)


def payout_reverse_in_transaction(*, reversal_amount: int, fee_refund: int, actor=None, source: str = "ops",
                                  reason: str = "", payout_id: int | None = None,
                                  platform_order_no: str | None = None) -> Payout:
    """The reversal inside the caller's transaction (an approved staff request, apps.common.staff_requests)."""
    payout = lock_payout(payout_id=payout_id, platform_order_no=platform_order_no)
    if getattr(actor, "pk", None) and not actor.has_perm(REVERSE_PERMISSION):
        raise PayoutActionRefused(f"{actor.get_username()} may not reverse payouts.")
    return _reverse_locked(payout, reversal_amount=reversal_amount, fee_refund=fee_refund, actor=actor,
                           source=source, reason=reason)


@retry_conflicts
@transaction.atomic(durable=True)
def payout_channel_returned(*, platform_order_no: str, reversal_amount: int | None = None,
                            fee_refund: int | None = None, reason: str = "returned by the bank") -> Payout:
    """The channel's return notice for a paid payout: the same reversal, by default in full with the fee
    refunded (the payee never got the money). A repeated notice is harmless."""
    payout = lock_payout(platform_order_no=platform_order_no)
    if payout.reversed_at:
        return payout
    return payout_channel_returned_locked(payout, reversal_amount=reversal_amount, fee_refund=fee_refund,
                                          reason=reason)


def payout_channel_returned_locked(payout: Payout, *, reversal_amount: int | None = None,
                                   fee_refund: int | None = None, reason: str = "returned by the bank") -> Payout:
    """The channel's return on a payout the caller has locked in its durable transaction."""
    return _reverse_locked(payout, reversal_amount=payout.amount if reversal_amount is None else reversal_amount,
                           fee_refund=payout.fee if fee_refund is None else fee_refund, actor=None,
                           source=f"channel {payout.channel.code}", reason=reason)


def _reverse_locked(payout: Payout, *, reversal_amount: int, fee_refund: int, actor, source: str,
                    reason: str) -> Payout:
    if payout.status != Payout.Status.SUCCESS:
        raise PayoutActionRefused(f"payout {payout} is {payout.status}; only a SUCCESS payout can be reversed.")
    if payout.reversed_at:
        raise PayoutActionRefused(f"payout {payout} was already reversed "
                                  f"at {payout.reversed_at:%Y-%m-%d %H:%M:%S} UTC.")
    if type(reversal_amount) is not int or not 1 <= reversal_amount <= payout.amount:
        raise PayoutActionRefused(f"reversal amount must be between 1 and the payout amount {payout.amount}.")
    if type(fee_refund) is not int or not 0 <= fee_refund <= payout.fee:
        raise PayoutActionRefused(f"fee refund must be between 0 and the payout fee {payout.fee}.")
    payout.reverse(reversal_amount=reversal_amount, fee_refund=fee_refund)
    payout.save(update_fields=["reversal_amount", "fee_refund", "reversed_at", "updated_at"])
    legs = [ledger.Leg(AccountKind.PAYOUT_CLEARING, -reversal_amount)]
    if fee_refund:
        legs.append(ledger.Leg(AccountKind.FEE_REVENUE, -fee_refund))
    legs.append(ledger.Leg(AccountKind.AVAILABLE, reversal_amount + fee_refund, payout.merchant_id))
    ledger.post(kind="payout.reversal", cause=payout.platform_order_no, currency=payout.currency_id, legs=legs,
                merchant_id=payout.merchant_id, memo=reason or f"payout {payout} reversed ({source})")
    callback_enqueue(merchant=payout.merchant, type=CallbackEvent.Type.PAYOUT_REVERSED,
                     platform_order_no=payout.platform_order_no, payload=payout_reversed_payload(payout))
    audit.record(actor=actor, actor_label=_actor_label(actor, audit.cli_label(source)), action="payout.reverse",
                 obj=payout,
                 old={"reversed_at": None},
                 new={"reversal_amount": reversal_amount, "fee_refund": fee_refund, "source": source},
                 reason=reason)
    logger.info("payout %s reversed: %s + fee %s back to %s (%s)", payout, reversal_amount, fee_refund,
                payout.merchant.merchant_no, mask_account(payout.payee_account))
    return payout
