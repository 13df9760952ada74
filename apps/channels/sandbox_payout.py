"""Sandbox payout channel (docs/api.md, "Sandbox channel"): settles asynchronously through Celery, outcome by
payee_account suffix.

  ...4000  fails with fail_reason "account closed"
  ...4001  is paid, then returned by the "bank" (reversed in full, fee refunded) shortly after SUCCESS
  other    is paid

Results enter the platform through the same payout services a real upstream notification would use
(payout_channel_result / payout_channel_returned, registered as payout_handlers().result / .returned).

Like a real upstream, the sandbox bank can be asked what became of a disbursement (`payout_state`): the payout
sweeper asks it when the settlement or return task was lost (apps/payout/sweep.py) and applies the answer through
the same services, so the outcome is the one the task would have applied.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.channels.base import PayoutAdapter, PayoutState
from apps.channels.environment import SANDBOX, platform_environment
from apps.channels.models import SandboxDisbursement
from apps.channels.registry import payout_handlers, register_payout
from apps.common.retry import money_task

logger = logging.getLogger(__name__)

OUTCOME_FAILED = "failed"
OUTCOME_PAID = "paid"
OUTCOME_PAID_THEN_RETURNED = "paid_then_returned"
CLOSED_ACCOUNT_REASON = "account closed"


def sandbox_outcome(payee_account: str) -> str:
    if payee_account.endswith("4000"):
        return OUTCOME_FAILED
    if payee_account.endswith("4001"):
        return OUTCOME_PAID_THEN_RETURNED
    return OUTCOME_PAID


@register_payout
class SandboxPayoutAdapter(PayoutAdapter):
    name = "sandbox"
    is_sandbox = True  # serves sandbox deployments only (apps.channels.environment)

    def start_disbursement(self, *, payout) -> str:
        """The bank records the disbursement once per platform_order_no and schedules its settlement only then;
        a re-submission gets the recorded reference back."""
        outcome = sandbox_outcome(payout.payee_account)
        # The bank's own transaction, not the platform's. The settlement is queued inside it (the task reads
        # nothing of the record): a failed publish leaves no record, so the next submission starts afresh, and a
        # concurrent duplicate waits on the unique key, then finds the record and schedules nothing.
        with transaction.atomic(durable=True):
            disbursement, created = SandboxDisbursement.objects.get_or_create(
                platform_order_no=payout.platform_order_no,
                defaults={"reference": f"SBX-{payout.platform_order_no}", "outcome": outcome})
            if created:
                sandbox_payout_settle.apply_async(args=[payout.platform_order_no, outcome],
                                                  countdown=settings.SANDBOX_PAYOUT_SETTLE_SECONDS)
        return disbursement.reference

    def payout_state(self, *, payout) -> PayoutState:
        """The sandbox bank's own view of the disbursement, from its record: what the settlement task decides (and
        the return after it) once each is due, 'pending' before, 'missing' when it never accepted one."""
        disbursement = SandboxDisbursement.objects.filter(platform_order_no=payout.platform_order_no).first()
        if disbursement is None:
            return PayoutState(outcome="missing")
        now = timezone.now()
        settles_at = disbursement.created_at + timedelta(seconds=settings.SANDBOX_PAYOUT_SETTLE_SECONDS)
        returns_at = settles_at + timedelta(seconds=settings.SANDBOX_PAYOUT_RETURN_SECONDS)
        if now < settles_at:
            return PayoutState(outcome="pending", reference=disbursement.reference, upstream_status="PENDING")
        if disbursement.outcome == OUTCOME_FAILED:
            return PayoutState(outcome="failed", reference=disbursement.reference, upstream_status="FAILED",
                               fail_reason=CLOSED_ACCOUNT_REASON)
        if disbursement.outcome == OUTCOME_PAID_THEN_RETURNED and now >= returns_at:
            return PayoutState(outcome="returned", reference=disbursement.reference, upstream_status="RETURNED")
        return PayoutState(outcome="paid", reference=disbursement.reference, upstream_status="PAID")


@money_task
def sandbox_payout_settle(platform_order_no: str, outcome: str) -> None:
    """The sandbox bank's asynchronous answer to a disbursement (never in a live deployment)."""
    if platform_environment() != SANDBOX:
        logger.error("sandbox settlement of %s refused: this is a live deployment", platform_order_no)
        return

    if outcome == OUTCOME_FAILED:
        payout_handlers().result(platform_order_no=platform_order_no, outcome="failed",
                                 fail_reason=CLOSED_ACCOUNT_REASON)
        return
    payout_handlers().result(platform_order_no=platform_order_no, outcome="paid")
    if outcome == OUTCOME_PAID_THEN_RETURNED:
        # Dispatched after the SUCCESS commit, so the SUCCESS callback is enqueued before the reversal one.
        sandbox_payout_return.apply_async(args=[platform_order_no], countdown=settings.SANDBOX_PAYOUT_RETURN_SECONDS)


@money_task
def sandbox_payout_return(platform_order_no: str) -> None:
    """The sandbox bank returns a paid disbursement: reversed in full, fee refunded."""
    if platform_environment() != SANDBOX:
        logger.error("sandbox return of %s refused: this is a live deployment", platform_order_no)
        return

    payout_handlers().returned(platform_order_no=platform_order_no, reason="returned by the bank (sandbox)")
