"""Payouts by hand: an approved batch's payouts are created in a task (dispatched after the approval commits), and a
beat sweep resumes a batch whose processing stopped."""

from apps.common.retry import money_task
from apps.merchant_payouts.services import payout_batch_process, payout_batches_resume


@money_task
def process_payout_batch(batch_id: int) -> None:
    """Create the payouts of an approved batch (idempotent per row: apps.merchant_payouts.services)."""
    payout_batch_process(batch_id=batch_id)


@money_task
def resume_payout_batches() -> int:
    return len(payout_batches_resume())
