"""What an upstream says about a disbursement, applied to the payout: the webhook's and reconciliation's entry
(registered with apps.channels.registry in PayoutConfig.ready(); docs/channels.md).

The state is the one read from the upstream's API, never from a webhook body. The services called lock the payout
row and return early when it is already where the answer puts it, so a duplicate, late or out-of-order answer
changes nothing twice."""

import logging
from datetime import datetime, timedelta

from django.conf import settings

from apps.channels.base import PayoutState, UpstreamRejected, UpstreamUnavailable
from apps.channels.models import Channel
from apps.channels.registry import payout_adapter, upstream_adapter_names
from apps.payout.models import Payout
from apps.payout.services import PayoutActionRefused, payout_channel_result, payout_channel_returned

logger = logging.getLogger(__name__)


def payout_upstream_apply(*, platform_order_no: str, state: PayoutState, adapter: str) -> str | None:
    """An upstream's disbursement state onto the payout: 'paid' → SUCCESS, 'failed' → FAILED, 'returned' → SUCCESS
    then reversed in full (the return of a payout whose success notice never came). Returns 'succeeded', 'failed',
    'reversed' when the payout changed, else None."""
    payout = Payout.objects.select_related("channel").filter(platform_order_no=platform_order_no).first()
    if payout is None or payout.channel.adapter != adapter:
        logger.warning("%s payout %r (upstream %s) is no order of ours; ignored", adapter, platform_order_no,
                       state.reference)
        return None
    if payout.upstream_reference and state.reference and state.reference != payout.upstream_reference:
        # Xendit's reference_id need not be unique: another disbursement carrying our order number is not ours.
        logger.error("payout %s is upstream %s; %s %s names it too; nothing applied", platform_order_no,
                     payout.upstream_reference, adapter, state.reference)
        return None
    if state.amount is not None and (state.amount, state.currency) != (payout.amount, payout.currency_id):
        logger.error("payout %s: upstream %s says %s %s, the order is %s %s; nothing applied", platform_order_no,
                     state.reference, state.amount, state.currency, payout.amount, payout.currency_id)
        return None
    if state.reference and not payout.upstream_reference:
        # The create's answer was lost (timeout): the reference learnt from the upstream, this column only.
        Payout.objects.filter(pk=payout.pk, upstream_reference="").update(upstream_reference=state.reference)
    processing = payout.status == Payout.Status.PROCESSING
    try:
        if state.outcome == "paid" and processing:
            payout_channel_result(platform_order_no=platform_order_no, outcome="paid")
            return "succeeded"
        if state.outcome == "failed" and processing:
            payout_channel_result(platform_order_no=platform_order_no, outcome="failed", fail_reason=state.fail_reason)
            return "failed"
        if state.outcome == "returned" and (processing or
                                            (payout.status == Payout.Status.SUCCESS and not payout.reversed_at)):
            if processing:
                payout_channel_result(platform_order_no=platform_order_no, outcome="paid")
            payout_channel_returned(platform_order_no=platform_order_no, reason=f"reversed by {adapter}")
            return "reversed"
    except PayoutActionRefused as exc:
        # e.g. a failure notice for a payout the upstream had already reported paid: an operator looks at it.
        logger.error("payout %s: upstream says %s; not applied: %s", platform_order_no, state.upstream_status, exc)
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
               .order_by("submitted_at"))
    for payout in payouts:
        result["checked"] += 1
        try:
            state = payout_adapter(payout.channel).payout_state(payout=payout)
            if state.outcome == "missing":
                continue  # never reached the upstream: the payout sweeper submits it again (same idempotency key)
            change = payout_upstream_apply(platform_order_no=payout.platform_order_no, state=state,
                                           adapter=payout.channel.adapter)
        except (UpstreamUnavailable, UpstreamRejected) as exc:
            errors.append({"platform_order_no": payout.platform_order_no, "error": str(exc)})
            continue
        if change:
            result[change].append(payout.platform_order_no)
    return result, errors
