"""Built-in sandbox pay-in channel (docs/api.md, "Sandbox channel"): the hosted page itself plays the upstream.

Pay: the sandbox "upstream" reports the payment through collection_notify_paid (registered as
payin_handlers().paid), the same service a real upstream notification goes through. Fail: the payer's attempt is declined upstream; the order stays CREATED.

Refund: answered SANDBOX_REFUND_SETTLE_SECONDS after its submission by a task, through refund_channel_result
(payin_handlers().refund_result): an amount ending in 99 (minor units) fails, any other succeeds. The outcome is a
function of the refund alone, so the refund sweep asks `refund_state` when the task was lost and gets the same answer.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from apps.channels.base import PayinAdapter, PaymentStart, RefundState
from apps.channels.environment import SANDBOX, platform_environment
from apps.channels.registry import payin_handlers, register_payin
from apps.common.retry import money_task

logger = logging.getLogger(__name__)

REFUND_FAIL_REASON = "the sandbox fails every refund whose amount ends in 99"


def sandbox_refund_outcome(amount: int) -> str:
    return "failed" if amount % 100 == 99 else "succeeded"


def sandbox_reference(order) -> str:
    return f"SBX{order.platform_order_no}"


@register_payin
class SandboxPayinAdapter(PayinAdapter):
    name = "sandbox"
    # The hosted page renders the Pay / Fail form instead of forwarding the payer upstream.
    is_sandbox = True

    def start_payment(self, *, order) -> PaymentStart:
        # Nothing opens upstream: the reference is a function of platform_order_no, the same on every call.
        return PaymentStart(upstream_reference=sandbox_reference(order))

    def simulate_paid(self, *, order):
        """What the upstream's asynchronous 'paid' notification does: enter through the idempotent service."""
        return payin_handlers().paid(platform_order_no=order.platform_order_no,
                                     upstream_reference=sandbox_reference(order))

    def simulate_failed(self, *, order) -> None:
        """A declined attempt: nothing changes, the payer may try again until the order expires."""

    takes_refunds = True

    def start_refund(self, *, refund) -> str:
        """The sandbox takes every refund; its answer comes by a task a few seconds later (a second submission
        queues a second answer, which the refund service takes as a replay)."""
        sandbox_refund_settle.apply_async(args=[refund.refund_no, sandbox_refund_outcome(refund.amount)],
                                          countdown=settings.SANDBOX_REFUND_SETTLE_SECONDS)
        return f"SBXR{refund.refund_no}"

    def refund_state(self, *, refund) -> RefundState:
        """The sandbox's answer as the task gives it once due, 'pending' before; 'missing' for a refund never
        submitted (the sandbox keeps no record: a submission leaves the reference on the refund)."""
        if not refund.upstream_reference:
            return RefundState(outcome="missing")
        if timezone.now() < refund.created_at + timedelta(seconds=settings.SANDBOX_REFUND_SETTLE_SECONDS):
            return RefundState(outcome="pending", reference=f"SBXR{refund.refund_no}")
        outcome = sandbox_refund_outcome(refund.amount)
        return RefundState(outcome=outcome, reference=f"SBXR{refund.refund_no}",
                           fail_reason=REFUND_FAIL_REASON if outcome == "failed" else "")


@money_task
def sandbox_refund_settle(refund_no: str, outcome: str) -> None:
    """The sandbox's asynchronous answer to a refund (never in a live deployment)."""
    if platform_environment() != SANDBOX:
        logger.error("sandbox refund answer of %s refused: this is a live deployment", refund_no)
        return
    payin_handlers().refund_result(refund_no=refund_no, outcome=outcome,
                                   fail_reason=REFUND_FAIL_REASON if outcome == "failed" else "",
                                   upstream_reference=f"SBXR{refund_no}")
