"""Built-in sandbox pay-in channel (docs/api.md, "Sandbox channel"): the hosted page itself plays the upstream.

Pay: the sandbox "upstream" reports the payment through collection_notify_paid (registered as
payin_handlers().paid), the same service a real upstream notification goes through. Fail: the payer's attempt is declined upstream; the order stays CREATED.
"""

from apps.channels.base import PayinAdapter, PaymentStart
from apps.channels.registry import payin_handlers, register_payin


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
