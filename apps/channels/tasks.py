"""Channel tasks: opening a pay-in upstream after pay/create, and reconciliation of what lost webhooks left open
(beat: config/settings/base.py, every 5 min)."""

from celery import shared_task

from apps.channels.services import channel_payin_open, channels_reconcile


@shared_task(acks_late=True)
def reconcile_channels() -> dict:
    """Ask the upstreams about stale PROCESSING payouts and expired pay-ins; idempotent like the webhooks."""
    return channels_reconcile()


@shared_task(acks_late=True)
def open_upstream_payin(platform_order_no: str) -> str | None:
    """Open the order's upstream payment (Xendit: the invoice); idempotent per platform_order_no."""
    return channel_payin_open(platform_order_no=platform_order_no)
