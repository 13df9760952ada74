"""Payout tasks: submission to the channel (a drain woken after commit, one payout's task from the sweeper) and the
sweeper (beat, every 15 s)."""

from django.utils import timezone

from apps.common.models import Heartbeat
from apps.common.retry import money_task
from apps.payout import services
from apps.payout.sweep import payouts_sweep


@money_task
def submit_approved_payouts() -> int:
    """Submit every APPROVED payout (services.payout_submit_drain), queued after the commit of an approval or an
    APPROVED create when no queued drain has yet to look (the wake mark)."""
    return services.payout_submit_drain()


@money_task
def submit_payout(payout_id: int) -> None:
    """APPROVED → PROCESSING and hand the order to its channel; a no-op for an order already past that."""
    services.payout_submit(payout_id=payout_id)


@money_task
def sweep_stuck_payouts() -> int:
    """Hand every stranded payout to its next step (apps/payout/sweep.py): APPROVED never submitted, PROCESSING never
    acknowledged, a sandbox settlement or return that was lost. Idempotent under each order's row lock."""
    handed = payouts_sweep()
    Heartbeat.objects.update_or_create(name="payout.sweeper", defaults={"beat_at": timezone.now()})
    return sum(handed.values())
