"""What serves a create request, checked in the contract's order (§2): currency 1001 → product 1002 → amount 1003."""

from dataclasses import dataclass

from apps.channels.models import Channel
from apps.channels.registry import serving_channel
from apps.common.errors import DomainError, ErrorCode
from apps.merchants.models import MerchantCurrency, Product
from apps.merchants.selectors import merchant_currency_enabled, merchant_product

DIRECTION = {Product.Kind.COLLECTION: Channel.Direction.PAYIN, Product.Kind.PAYOUT: Channel.Direction.PAYOUT}


@dataclass(frozen=True)
class Route:
    channel: Channel
    product: Product
    merchant_currency: MerchantCurrency


def order_route(*, merchant_id: int, kind: Product.Kind, currency: str, product_code: str, amount: int) -> Route:
    """The serving channel and the merchant's product for a collection or payout create, or the DomainError."""
    enabled = merchant_currency_enabled(merchant_id=merchant_id, currency=currency)
    if enabled is None:
        raise DomainError(ErrorCode.CURRENCY_NOT_AVAILABLE, f"currency {currency} is not enabled for this merchant.")
    if not enabled.currency.active:
        raise DomainError(ErrorCode.CURRENCY_NOT_AVAILABLE, f"currency {currency} is not active.")
    direction = DIRECTION[kind]
    channel = serving_channel(currency=currency, direction=direction)
    if channel is None:
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
    return Route(channel, product, enabled)
