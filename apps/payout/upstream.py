"""What an upstream says about a disbursement, applied to the payout: the webhook's and reconciliation's entry
(registered with apps.channels.registry in PayoutConfig.ready(); docs/channels.md).

The state is the one read from the upstream's API, never from a webhook body. It is decided under the payout's row
lock and applied through the same locked transitions as the channel services, so a duplicate, late or out-of-order
answer changes nothing twice and only the call that changed the payout reports it."""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from apps.channels.base import PayoutState, UpstreamRejected, UpstreamUnavailable
from apps.channels.models import Channel
from apps.channels.registry import payout_adapter, upstream_adapter_names
from apps.common.retry import retry_conflicts
from apps.payout.models import Payout
from apps.payout.services import (PayoutNotFound, lock_payout, payout_channel_result_locked,
                                  payout_channel_returned_locked)

logger = logging.getLogger(__name__)


@retry_conflicts
@transaction.atomic(durable=True)
def payout_upstream_apply(*, platform_order_no: str, state: PayoutState, adapter: str) -> str | None:
    """An upstream's disbursement state onto the payout: 'paid' → SUCCESS, 'failed' → FAILED, 'returned' → SUCCESS
    then reversed in full (the return of a payout whose success notice never came). Returns 'succeeded', 'failed',
    'reversed' when this call changed the payout, else None.

    Decided under the payout's row lock (lock order: docs/ledger.md), so of concurrent answers (12 identical
    webhooks) exactly one reports the change. Only the disbursement bound to our idempotency key counts: the
    reference the adapter's create answered (payout_submit stores it). Before it is known, nothing read from the
    upstream is applied: another disbursement may carry our reference_id, amount and currency (docs/channels.md)."""
    try:
        payout = lock_payout(platform_order_no=platform_order_no)
    except PayoutNotFound:
        payout = None
    if payout is None or payout.channel.adapter != adapter:
        logger.warning("%s payout %r (upstream %s) is no order of ours; ignored", adapter, platform_order_no,
                       state.reference)
        return None
    if not payout.upstream_reference:
        logger.warning("payout %s has no upstream reference of ours yet; %s %s (%s) not applied: only the "
                       "disbursement our submission's idempotency key created counts", platform_order_no, adapter,
                       state.reference, state.upstream_status)
        return None
    if state.reference != payout.upstream_reference:
        # Xendit's reference_id need not be unique: another disbursement carrying our order number is not ours.
        logger.error("payout %s is upstream %s; %s %s (%s) names it too; nothing applied", platform_order_no,
                     payout.upstream_reference, adapter, state.reference, state.upstream_status)
        return None
    if state.amount is not None and (state.amount, state.currency) != (payout.amount, payout.currency_id):
        logger.error("payout %s: upstream %s says %s %s, the order is %s %s; nothing applied", platform_order_no,
                     state.reference, state.amount, state.currency, payout.amount, payout.currency_id)
        return None
    processing = payout.status == Payout.Status.PROCESSING
    if state.outcome in ("paid", "failed") and processing:
        payout_channel_result_locked(payout, outcome=state.outcome, fail_reason=state.fail_reason)
        return "succeeded" if state.outcome == "paid" else "failed"
    if state.outcome == "returned" and (processing or (payout.status == Payout.Status.SUCCESS
                                                       and not payout.reversed_at)):
        if processing:
            payout_channel_result_locked(payout, outcome="paid")
        payout_channel_returned_locked(payout, reason=f"reversed by {adapter}")
        return "reversed"
    target = {"paid": Payout.Status.SUCCESS, "failed": Payout.Status.FAILED}.get(state.outcome)
    if target and payout.status != target:
        # e.g. a failure notice for a payout the upstream had already reported paid: an operator looks at it.
        logger.error("payout %s is %s; upstream says %s; not applied", platform_order_no, payout.status,
                     state.upstream_status)
    return None


def payout_upstream_reconcile(*, now: datetime) -> tuple[dict, list[dict]]:
    """Ask the upstreams about payouts PROCESSING longer than CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS and apply the
    answer as a webhook would; each payout in its own transactions. Returns what changed and the payouts whose
    upstream did not answer (asked again next run)."""
    result = {"checked": 0, "succeeded": [], "failed": [], "reversed": []}
    errors = []
    stale = now - timedelta(seconds=settings.CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS)
    payouts = (Payout.objects.select_related("channel", "currency")
               .filter(status=Payout.Status.PROCESSING, submitted_at__lt=stale,
                       channel__adapter__in=upstream_adapter_names(Channel.Direction.PAYOUT))
               # Without our reference nothing read back may be applied: the sweeper's re-submission (same
               # idempotency key) learns it first.
               .exclude(upstream_reference="")
               .order_by("submitted_at"))
    for payout in payouts:
        result["checked"] += 1
        try:
            state = payout_adapter(payout.channel).payout_state(payout=payout)
            change = payout_upstream_apply(platform_order_no=payout.platform_order_no, state=state,
                                           adapter=payout.channel.adapter)
        except (UpstreamUnavailable, UpstreamRejected) as exc:
            errors.append({"platform_order_no": payout.platform_order_no, "error": str(exc)})
            continue
        if change:
            result[change].append(payout.platform_order_no)
    return result, errors
