"""Payout tasks: submission to the channel (dispatched after commit) and the sweeper (beat, every 15 s)."""

import logging
from datetime import timedelta

from django.utils import timezone

from apps.common.models import Heartbeat
from apps.common.retry import money_task
from apps.payout import services
from apps.payout.selectors import payouts_approved_unsubmitted, payouts_processing_unsent

logger = logging.getLogger(__name__)

# An APPROVED order normally leaves for PROCESSING within a second; older ones lost their dispatch.
SUBMIT_GRACE = timedelta(seconds=10)


@money_task
def submit_payout(payout_id: int) -> None:
    """APPROVED → PROCESSING and hand the order to its channel; a no-op for an order already past that."""
    services.payout_submit(payout_id=payout_id)


@money_task
def sweep_stuck_payouts() -> int:
    """Re-dispatch APPROVED orders never submitted (broker down at commit) and PROCESSING orders the adapter
    never acknowledged. Idempotent: payout_submit moves each order at most once."""
    stuck = payouts_approved_unsubmitted(older_than=SUBMIT_GRACE)
    stuck += payouts_processing_unsent(older_than=services.RESUBMIT_AFTER)
    for payout_id in stuck:
        services.payout_submit_dispatch(payout_id=payout_id)
    if stuck:
        logger.warning("re-dispatched %d stuck payouts", len(stuck))
    Heartbeat.objects.update_or_create(name="payout.sweeper", defaults={"beat_at": timezone.now()})
    return len(stuck)
