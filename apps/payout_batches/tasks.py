"""Payouts by hand: a large approved batch's payouts are created in a task (dispatched by the approval), and a beat
sweep resumes a batch whose processing stopped (a lost request or task). Rows already done are skipped; a row's
payout is found again by its mch_order_no, never created twice (apps.payout_batches.services)."""

from apps.common.retry import money_task
from apps.payout_batches.services import payout_batch_process, payout_batches_resume


@money_task
def process_payout_batch(batch_id: int) -> None:
    payout_batch_process(batch_id=batch_id)


@money_task
def resume_payout_batches() -> int:
    return len(payout_batches_resume())
