"""Payouts by hand: the approval request creates an approved batch's payouts; this beat sweep resumes a batch whose
processing stopped (the request lost half-way). Rows already done are skipped; a row's payout is found again by its
mch_order_no, never created twice (apps.merchant_payouts.services)."""

from apps.common.retry import money_task
from apps.merchant_payouts.services import payout_batches_resume


@money_task
def resume_payout_batches() -> int:
    return len(payout_batches_resume())
