"""Channel adapter interfaces: how the platform talks to upstream banks and wallets.

An adapter only talks to the upstream. What the upstream reports back (paid, failed, returned) enters the
platform through the domains' idempotent services, which payout and collection register at startup (channels
imports neither; apps.channels.registry):
  payin_handlers().paid(...)            collection_notify_paid: pay-in completed upstream (the sandbox)
  payin_handlers().apply_state(...)     collection_upstream_apply: a PayinState read from the upstream's API
  payout_handlers().result(...)         payout_channel_result: disbursement paid or failed
  payout_handlers().returned(...)       payout_channel_returned: a paid disbursement came back (reversal)
  payout_handlers().apply_state(...)    payout_upstream_apply: a PayoutState read from the upstream's API
  payin_handlers().refund_result(...)   refund_channel_result: a refund succeeded or failed upstream
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime


class UpstreamUnavailable(RuntimeError):
    """The upstream did not answer (timeout, connection refused, 5xx): nothing is known; retry with the same
    idempotency key, reconciliation resolves what stays open. Ambiguous: the request may have been taken (an answer
    lost), so a payout that met it never moves to another channel on its strength (docs/channels.md, "Failover").
    Counts as a failure of the channel's health (apps.channels.health)."""


class UpstreamDeclined(UpstreamUnavailable):
    """The upstream definitely did not take *this request*: it never left (connection refused, connect timeout), or
    the upstream refused it as a whole before doing anything (401/403 our key, 429 rate limit). Still retried like
    UpstreamUnavailable (every caller that catches that catches this); the failover may move the order to another
    channel when every attempt at this channel was declined (docs/channels.md, "Failover"). Raise it only when
    certain: when in doubt, UpstreamUnavailable."""


class LookupUnknown(UpstreamUnavailable):
    """A lookup by our reference that could not read the upstream's whole answer (more pages than it may read, an
    error on a page, a list that does not say whether more follows or cannot be filtered by our reference): it
    answers "unknown", never "not found". Ambiguous like any UpstreamUnavailable, and never declined: the order stays
    where it is, is not sent again as new and is not failed (docs/channels.md, "Lookups by our reference")."""


class UpstreamRejected(RuntimeError):
    """The upstream answered with a definite refusal (4xx) of this order (e.g. the payee's account): the upstream
    itself works, so this counts as a success for the channel's health."""

    def __init__(self, message: str, *, status: int = 0, error_code: str = ""):
        super().__init__(message)
        self.status = status
        self.error_code = error_code


@dataclass(frozen=True)
class PayinState:
    """What the upstream says about a pay-in, read from its API (never from a webhook body). outcome: 'pending',
    'paid' or 'expired'; amount in minor units."""

    outcome: str
    reference: str
    platform_order_no: str
    amount: int
    currency: str
    upstream_status: str
    paid_at: datetime | None = None
    # How the payer paid, in the upstream's words ("gcash", "card", "QRPH"); "" when it does not say.
    payment_method: str = ""


@dataclass(frozen=True)
class PayoutState:
    """What the upstream says about a disbursement, read from its API. outcome: 'pending', 'paid', 'failed',
    'returned' (paid, then reversed), or 'missing' (the upstream has no disbursement for the order). amount (minor
    units) and currency as the upstream holds them; None when the upstream did not say."""

    outcome: str
    reference: str = ""
    upstream_status: str = ""
    fail_reason: str = ""
    amount: int | None = None
    currency: str = ""


@dataclass(frozen=True)
class RefundState:
    """What the channel says about a refund, looked up by our refund_no. outcome: 'pending', 'succeeded', 'failed',
    or 'missing' (the channel answered, read all it holds, and has no refund of ours: one whose submission timed out
    never arrived and may be submitted again). amount (minor units) and currency as the channel holds them; None
    when it did not say (the sandbox)."""

    outcome: str
    reference: str = ""
    fail_reason: str = ""
    amount: int | None = None
    currency: str = ""


@dataclass(frozen=True)
class RefundRuleDefault:
    """An adapter's refund rule for one payment method ("" for every other), used by a channel that has no
    RefundRule rows of its own (apps.channels.refund_rules)."""

    method: str = ""
    refundable: bool = True
    partial: bool = True
    window_days: int | None = None


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

    def payin_state(self, *, order, reference: str, channel=None) -> PayinState:
        """A real upstream's current view of the pay-in (reconciliation and webhooks), asked of `channel` (the one the
        payment was opened on: UpstreamPayin.channel), the order's own by default. Sandbox: not asked."""
        raise NotImplementedError

    # Whether this channel gives a payment back (a refund of it is refused at create, 2007, when not).
    takes_refunds = False
    # The upstream's own refund rules by payment method, for a channel without RefundRule rows (docs/channels.md,
    # "Refund rules"); none: every paid payment can be refunded, in parts, at any time.
    refund_rules: tuple[RefundRuleDefault, ...] = ()
    # The HTTP calls one refund submission makes at most (its lookups included): the submission lease lasts that many
    # timeouts (apps.channels.submission).
    refund_calls: int = 2

    def start_refund(self, *, refund) -> str:
        """Ask the upstream to give `refund.amount` of the payment of `refund.order` back; returns the upstream
        reference. The result arrives later through payin_handlers().refund_result. `refund_no` is the upstream
        idempotency key: the same refund submitted twice is one refund upstream, with the same reference.
        UpstreamRejected when it refuses, UpstreamUnavailable when it does not answer."""
        raise UpstreamRejected(f"{self.name}: refunds are not supported")

    def refund_state(self, *, refund) -> RefundState:
        """The upstream's current view of the refund, looked up by our refund_no (the refund sweep asks when the
        answer is late, and before submitting again a refund whose submission was ambiguous). Raises
        UpstreamUnavailable (LookupUnknown for a list not read to its end) when it cannot tell."""
        raise NotImplementedError


class PayoutAdapter(ABC):
    name: str
    # The HTTP calls one submission to this upstream makes at most (its lookups' pages included): the failover's send
    # lease lasts that many timeouts, so a sender killed mid-send frees the payout within one submission's time.
    send_calls: int = 4

    @abstractmethod
    def start_disbursement(self, *, payout) -> str:
        """Submit a payout upstream (the only place the full payee account is sent); returns the upstream
        reference. The result arrives later through payout_handlers().result / .apply_state.

        `platform_order_no` is the upstream idempotency key: payout_submit re-sends a PROCESSING payout whose
        submission was never acknowledged, so the same order submitted twice (or concurrently) must be one
        disbursement upstream, and the second call returns the same upstream reference."""

    def disbursement_lookup(self, *, payout) -> PayoutState:
        """Ask the upstream for any disbursement under our idempotency key / reference (platform_order_no), whatever
        its amount: outcome 'missing' only when the upstream answered, every page of its list was read and none is
        ours, which lets the failover move a payout whose submission was ambiguous to another channel
        (docs/channels.md, "Failover"). Raises UpstreamUnavailable (LookupUnknown for a list not read to its end)
        when it cannot tell. Default: cannot tell (the payout then waits for this channel)."""
        raise UpstreamUnavailable(f"{self.name}: no lookup by idempotency key")

    def payout_state(self, *, payout) -> PayoutState:
        """The upstream's current view of the disbursement: a real upstream's for reconciliation and webhooks; the
        sandbox bank's (from its own record) for the payout sweeper, when its settlement or return task was lost."""
        raise NotImplementedError
