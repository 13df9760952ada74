"""Opening a pay-in's upstream payment on its channel, or on the next one while none is open yet (docs/channels.md,
"Failover"). A pay-in moves only before the upstream payment (invoice, checkout session) is recorded: afterwards the
payer is always forwarded to that one. Every call feeds the channel's circuit breaker (apps.channels.health).
Adapter-agnostic: only the result types of apps.channels.base are read."""

import logging

from django.db import transaction
from django.utils import timezone

from apps.channels.base import PaymentStart, UpstreamRejected, UpstreamUnavailable
from apps.channels.health import breaker_record, channel_sendable
from apps.channels.models import Channel, UpstreamPayin
from apps.channels.registry import payin_adapter
from apps.channels.routing import route_next
from apps.collection.models import CollectionOrder
from apps.common import audit
from apps.common.retry import retry_conflicts

logger = logging.getLogger(__name__)


def _opened(order: CollectionOrder) -> bool:
    return UpstreamPayin.objects.filter(platform_order_no=order.platform_order_no).exists()


def collection_payment_start(*, order: CollectionOrder) -> tuple[CollectionOrder, PaymentStart]:
    """The order's upstream payment (opened now or before) and the order as it stands (its channel may have
    changed). Raises UpstreamUnavailable / UpstreamRejected / ChannelNotAllowed when none can be opened now."""
    for _ in range(8):  # each turn moves the order to another channel
        channel = order.channel
        adapter = payin_adapter(channel)
        if getattr(adapter, "is_sandbox", False):
            return order, adapter.start_payment(order=order)  # opens nothing upstream
        if not channel_sendable(channel) and not _opened(order):
            moved = _collection_move(order, because=f"{channel.code} circuit open")
            if moved is None:
                raise UpstreamUnavailable(f"pay-in {order}: channel {channel.code} circuit open, no other channel")
            order = moved
            continue
        try:
            start = adapter.start_payment(order=order)
        except UpstreamUnavailable as exc:
            breaker_record(channel=channel, ok=False, reason=str(exc))
            # No payment recorded: whatever the upstream may have opened, the payer never saw (docs/channels.md).
            moved = None if _opened(order) else _collection_move(order, because=f"{channel.code} unavailable: {exc}")
            if moved is None:
                raise
            order = moved
            continue
        except UpstreamRejected:
            breaker_record(channel=channel, ok=True)
            raise
        breaker_record(channel=channel, ok=True)
        return order, start
    raise UpstreamUnavailable(f"pay-in {order}: moved too often")


@retry_conflicts
@transaction.atomic(durable=True)
def _collection_move_locked(*, order_id: int, from_channel_id: int, to: Channel, reason: str) -> CollectionOrder | None:
    from apps.collection.services import lock_collection_order

    order = lock_collection_order(order_id=order_id)
    if (order.status != CollectionOrder.Status.CREATED or order.channel_id != from_channel_id or order.upstream_reference
            or UpstreamPayin.objects.filter(platform_order_no=order.platform_order_no).exists()):
        return None  # paid, expired, moved or opened meanwhile
    old = order.channel.code
    order.channel, order.route_reason = to, reason
    order.save(update_fields=["channel", "route_reason", "updated_at"])
    audit.record(actor=None, actor_label="system", action="collection.failover", obj=order,
                 old={"channel": old}, new={"channel": to.code}, reason=reason)
    return order


def _collection_move(order: CollectionOrder, *, because: str) -> CollectionOrder | None:
    if not order.is_payable():
        return None
    chosen = route_next(currency=order.currency_id, direction=Channel.Direction.PAYIN, amount=order.amount,
                        exclude={order.channel_id}, because=because)
    if chosen is None:
        return None
    channel, reason = chosen
    moved = _collection_move_locked(order_id=order.pk, from_channel_id=order.channel_id, to=channel, reason=reason)
    if moved is None:
        return None
    logger.warning("pay-in %s moved from %s to %s at %s (%s)", order, order.channel.code, channel.code,
                   timezone.now().isoformat(), reason)
    moved.currency = order.currency
    return moved
