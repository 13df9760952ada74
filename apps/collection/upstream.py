"""What an upstream says about a pay-in, applied to the collection order: the webhook's and reconciliation's entry
(registered with apps.channels.registry in CollectionConfig.ready(); docs/channels.md).

The state is the one read from the upstream's API, never from a webhook body. It is decided under the order's row
lock and applied through the same locked transitions as the collection services, so a duplicate, late or
out-of-order answer changes nothing twice and only the call that changed the order reports it."""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from apps.channels.base import PayinState, UpstreamRejected, UpstreamUnavailable
from apps.channels.models import Channel, UpstreamPayin
from apps.channels.registry import payin_adapter, upstream_adapter_names
from apps.channels.selectors import upstream_payins_unfinished
from apps.channels.services import upstream_payin_status_record
from apps.collection.models import CollectionOrder
from apps.collection.services import collection_expire_locked, collection_paid_locked, lock_collection_order
from apps.common.errors import DomainError
from apps.common import audit
from apps.common.retry import retry_conflicts

logger = logging.getLogger(__name__)


@retry_conflicts
@transaction.atomic(durable=True)
def collection_upstream_apply(*, state: PayinState, adapter: str) -> str | None:
    """An upstream's pay-in state onto the order: 'paid' → SUCCESS with its credit, 'expired' → EXPIRED. Returns
    'paid' / 'expired' when this call changed the order, else None. Decided under the order's row lock (lock
    order: docs/ledger.md), so of concurrent identical webhooks exactly one reports the change."""
    try:
        order = lock_collection_order(platform_order_no=state.platform_order_no)
    except DomainError:
        order = None
    if order is None or not _served_by(order, adapter):
        # Not ours (another system on the same upstream account): acknowledged, ignored; Xendit need not retry.
        logger.warning("%s pay-in %r (upstream %s) is no order of ours; ignored", adapter, state.platform_order_no,
                       state.reference)
        return None
    if (state.amount, state.currency) != (order.amount, order.currency_id):
        # Never credit what was not asked for; an operator looks at it.
        logger.error("pay-in %s: upstream %s says %s %s, the order is %s %s; nothing applied", order,
                     state.reference, state.amount, state.currency, order.amount, order.currency_id)
        return None
    if state.upstream_status and state.outcome in ("paid", "expired"):
        upstream_payin_status_record(platform_order_no=order.platform_order_no, upstream_status=state.upstream_status,
                                     payment_method=state.payment_method)
    if (state.outcome == "paid" and order.status == CollectionOrder.Status.SUCCESS
            and order.upstream_reference and order.upstream_reference != state.reference):
        # The payer paid a second upstream payment of one order (two invoices opened by racing first openings): the
        # order is credited once; the second payment is the operator's to refund upstream.
        logger.error("pay-in %s paid twice upstream: %s credited, %s (%s %s) not credited; refund it upstream",
                     order, order.upstream_reference, state.reference, state.amount, state.currency)
        return None
    if state.outcome == "paid" and order.status != CollectionOrder.Status.SUCCESS:
        collection_paid_locked(order, upstream_reference=state.reference, paid_at=state.paid_at)
        return "paid"
    if state.outcome == "expired" and collection_expire_locked(order):
        return "expired"
    return None


def _served_by(order: CollectionOrder, adapter: str) -> bool:
    """Whether the order is or was on a channel of that adapter: its channel now, the one its upstream payment was
    recorded on (UpstreamPayin), or one the failover moved it away from (collection.failover in the audit log). A
    payment of ours at the channel it left (an invoice whose answer was lost, opened before the move) is money the
    payer paid: recorded like any other (docs/channels.md, "Xendit and PayMongo together"), never ignored."""
    if order.channel.adapter == adapter:
        return True
    if UpstreamPayin.objects.filter(platform_order_no=order.platform_order_no, channel__adapter=adapter).exists():
        return True  # opened there while a failover moved the order (collection_payment_start's race)
    left = audit.trail(order, since=order.created_at).filter(action="collection.failover").values_list(
        "old__channel", flat=True)
    return Channel.objects.filter(code__in=[code for code in left if code], adapter=adapter).exists()


def collection_upstream_reconcile(*, now: datetime) -> tuple[dict, list[dict]]:
    """Ask the upstreams about pay-ins whose expiry passed less than CHANNEL_RECONCILE_PAYIN_WINDOW_SECONDS ago and
    whose upstream payment is not known final (CREATED or EXPIRED orders: a payment whose webhook was lost is
    honoured), and apply the answer as a webhook would. Returns what changed and the orders whose upstream did not
    answer (asked again next run)."""
    result = {"checked": 0, "paid": [], "expired": []}
    errors = []
    window = now - timedelta(seconds=settings.CHANNEL_RECONCILE_PAYIN_WINDOW_SECONDS)
    opened = upstream_payins_unfinished(adapters=upstream_adapter_names(Channel.Direction.PAYIN),
                                        opened_since=window - timedelta(days=1))
    orders = (CollectionOrder.objects.select_related("channel", "currency")
              .filter(platform_order_no__in=list(opened), expire_at__lt=now, expire_at__gte=window,
                      status__in=(CollectionOrder.Status.CREATED, CollectionOrder.Status.EXPIRED))
              .order_by("expire_at"))
    for order in orders:
        result["checked"] += 1
        try:
            # Asked of the channel the payment was opened on, which may not be the order's now (opened on A while
            # a failover moved the order to B: collection_payment_start's race).
            upstream = opened[order.platform_order_no]
            state = payin_adapter(upstream.channel).payin_state(order=order, reference=upstream.reference,
                                                                channel=upstream.channel)
            change = collection_upstream_apply(state=state, adapter=upstream.channel.adapter)
        except (UpstreamUnavailable, UpstreamRejected) as exc:
            errors.append({"platform_order_no": order.platform_order_no, "error": str(exc)})
            continue
        if change:
            result[change].append(order.platform_order_no)
    return result, errors
