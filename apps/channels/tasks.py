"""Channel tasks: reconciliation of what lost webhooks left open (beat: config/settings/base.py, every 5 min)."""

from apps.channels.services import channels_reconcile
from apps.common.retry import money_task


@money_task
def reconcile_channels() -> dict:
    """Ask the upstreams about stale PROCESSING payouts and expired pay-ins; idempotent like the webhooks."""
    return channels_reconcile()
