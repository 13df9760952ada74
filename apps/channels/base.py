"""Channel adapter interfaces: how the platform talks to upstream banks and wallets.

An adapter only talks to the upstream. What the upstream reports back (paid, failed, returned) enters the
platform through the domain's notification services, which are idempotent:
  apps.collection.services.collection_notify_paid(...)     pay-in completed upstream
  apps.payout.services.payout_channel_result(...)          disbursement paid or failed
  apps.payout.services.payout_channel_returned(...)        a paid disbursement came back (reversal)
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass


@dataclass(frozen=True)
class PaymentStart:
    """What the hosted page needs to forward the payer upstream (sandbox: render its own Pay/Fail form)."""

    upstream_reference: str
    redirect_url: str = ""


class PayinAdapter(ABC):
    name: str

    @abstractmethod
    def start_payment(self, *, order) -> PaymentStart:
        """Open the payment upstream for a collection order; called each time the payer opens pay_url.

        `platform_order_no` is the upstream idempotency key: every call for one order opens one upstream payment
        (or finds the one opened before) and returns the same upstream_reference."""


class PayoutAdapter(ABC):
    name: str

    @abstractmethod
    def start_disbursement(self, *, payout) -> str:
        """Submit a payout upstream (the only place the full payee account is sent); returns the upstream
        reference. The result arrives later through payout_channel_result.

        `platform_order_no` is the upstream idempotency key: payout_submit re-sends a PROCESSING payout whose
        submission was never acknowledged, so the same order submitted twice (or concurrently) must be one
        disbursement upstream, and the second call returns the same upstream reference."""
