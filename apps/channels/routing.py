"""What serves a create request, checked in the order of docs/api.md, "Checks, in order": currency 1001 → product 1002
→ amount 1003 → bank code 2006; then the channel among those that serve the order (docs/channels.md, "Routing")."""

from dataclasses import dataclass

from apps.channels.health import route_choose
from apps.channels.models import Channel
from apps.channels.registry import route_candidates
from apps.channels.selectors import bank_code_active
from apps.common.errors import DomainError, ErrorCode
from apps.merchants.models import MerchantCurrency, Product
from apps.merchants.selectors import merchant_currency_enabled, merchant_product

DIRECTION = {Product.Kind.COLLECTION: Channel.Direction.PAYIN, Product.Kind.PAYOUT: Channel.Direction.PAYOUT}


@dataclass(frozen=True)
class Route:
    channel: Channel
    product: Product
    merchant_currency: MerchantCurrency
    reason: str = ""  # why this channel: "priority 1", "failover: XENDIT_A circuit open; priority 2"


def order_route(*, merchant_id: int, kind: Product.Kind, currency: str, product_code: str, amount: int,
                bank_code: str | None = None) -> Route:
    """The channel and the merchant's product for a collection or payout create (bank_code: payouts), or the
    DomainError. A currency with no active, undrained channel is 1001 (docs/api.md, "Endpoints"); channels that exist
    but serve neither the amount nor the bank code are 1003 and 2006, the codes of those fields (docs/channels.md)."""
    enabled = merchant_currency_enabled(merchant_id=merchant_id, currency=currency)
    if enabled is None:
        raise DomainError(ErrorCode.CURRENCY_NOT_AVAILABLE, f"currency {currency} is not enabled for this merchant.")
    if not enabled.currency.active:
        raise DomainError(ErrorCode.CURRENCY_NOT_AVAILABLE, f"currency {currency} is not active.")
    direction = DIRECTION[kind]
    candidates = route_candidates(currency=currency, direction=direction)
    if not candidates:
        raise DomainError(ErrorCode.CURRENCY_NOT_AVAILABLE,
                          f"currency {currency} has no serving {direction.label.lower()} channel.")

    product = merchant_product(merchant_id=merchant_id, code=product_code)
    if product is None:
        raise DomainError(ErrorCode.PRODUCT_NOT_AVAILABLE, f"product_code {product_code} is not available.")
    if product.kind != kind:
        raise DomainError(ErrorCode.PRODUCT_NOT_AVAILABLE, f"product_code {product_code} is not a {kind} product.")
    if product.currency_id != currency:
        raise DomainError(ErrorCode.PRODUCT_NOT_AVAILABLE, f"product_code {product_code} is not for currency {currency}.")

    if not product.min_amount <= amount <= product.max_amount:
        raise DomainError(ErrorCode.AMOUNT_OUT_OF_RANGE,
                          f"amount must be between {product.min_amount} and {product.max_amount} for {product.code}.")
    serving = [c for c in candidates if c.channel.serves(amount=amount)]
    if not serving:
        raise DomainError(ErrorCode.AMOUNT_OUT_OF_RANGE,
                          f"no {direction.label.lower()} channel serves an amount of {amount} {currency}.")
    if bank_code is not None:
        if bank_code_active(currency=currency, code=bank_code) is None:
            raise DomainError(ErrorCode.UNKNOWN_BANK_CODE,
                              f"bank_code {bank_code} is not in the {currency} bank code table.")
        serving = [c for c in serving if c.channel.serves(amount=amount, bank_code=bank_code)]
        if not serving:
            raise DomainError(ErrorCode.UNKNOWN_BANK_CODE,
                              f"no payout channel serves bank_code {bank_code} for an amount of {amount} {currency}.")
    if len(serving) == 1 and serving[0].opened_at is None:
        # The common case, one healthy channel: nothing to weigh, no probe to count.
        channel, reason = serving[0].channel, f"priority {serving[0].channel.priority}"
    else:
        channel, reason = route_choose(serving)
    return Route(channel, product, enabled, reason)


def route_next(*, currency: str, direction: Channel.Direction, amount: int, bank_code: str | None = None,
               exclude: set[int] = frozenset(), because: str = "") -> tuple[Channel, str] | None:
    """Failover: the best *available* channel other than `exclude` that serves the order, and the reason to record
    ("failover: <because>; priority 2"); None when no healthy one does (the order then stays where it is)."""
    serving = [c for c in route_candidates(currency=currency, direction=direction)
               if c.channel.pk not in exclude and c.channel.serves(amount=amount, bank_code=bank_code)]
    chosen = route_choose(serving, fallback=False)
    if chosen is None:
        return None
    channel, reason = chosen
    return channel, (f"failover: {because}; {reason}" if because else reason)[:255]
