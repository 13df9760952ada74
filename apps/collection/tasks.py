"""Tasks of collections: opening a pay-in upstream after pay/create, and the periodic ones (beat schedule in
config/settings/base.py). Thin: each calls services."""

import logging

from django.utils import timezone

from apps.collection import refunds, services
from apps.collection.selectors import collection_orders_due_for_expiry
from apps.collection.sweep import SWEEPER_HEARTBEAT, payins_sweep
from apps.common.models import Heartbeat
from apps.common.retry import money_task

logger = logging.getLogger(__name__)


@money_task
def open_upstream_payin(platform_order_no: str) -> str | None:
    """Open the order's upstream payment (Xendit: the invoice) after pay/create; idempotent per platform_order_no."""
    return services.collection_upstream_open(platform_order_no=platform_order_no)


@money_task
def submit_refunds() -> int:
    """Hand every refund not yet submitted to the channel that took its payment (refunds.refund_submit_drain), queued
    after a refund's commit when no queued drain has yet to look (the wake mark)."""
    return refunds.refund_submit_drain()


@money_task
def submit_refund(refund_id: int) -> str | None:
    """Hand one refund to the channel that took its payment; idempotent per refund. refund/create wakes
    submit_refunds instead; this name stays consumable for a message a web process of the release before queued
    (a rolling deploy runs both)."""
    return refunds.refund_submit(refund_id=refund_id)


@money_task
def expire_due_orders() -> int:
    """Move CREATED orders past expire_at to EXPIRED, each in its own short transaction; idempotent."""
    now = timezone.now()
    expired = sum(services.collection_expire(order_id=order_id, now=now)
                  for order_id in collection_orders_due_for_expiry(now=now))
    if expired:
        logger.info("expired %d collection orders", expired)
    return expired


@money_task
def release_settlement() -> dict:
    """D1 release (docs/api.md, "Collection orders"): exactly once per credit however often it runs or is retried."""
    result = services.collection_settlement_release()
    if result["released"]:
        logger.info("D1 release: %s", result)
    return result


@money_task
def sweep_stranded_payins() -> int:
    """Beat, every 15 s: queue again the upstream opening of pay-ins whose opening task was lost (apps/collection/
    sweep.py) and finish refunds whose submission or answer was lost (apps/collection/refunds.py); idempotent per
    order."""
    handed = payins_sweep() | refunds.refunds_sweep()
    Heartbeat.objects.update_or_create(name=SWEEPER_HEARTBEAT, defaults={"beat_at": timezone.now()})
    return sum(handed.values())
