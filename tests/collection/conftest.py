import itertools

import pytest

from apps.collection.models import CollectionOrder
from apps.ledger.selectors import merchant_balances
from apps.merchants.models import MerchantProduct, Product
from tests.helpers import signed_post

CREATE = "/openapi/v1/pay/create"
QUERY = "/openapi/v1/pay/query"
_order_numbers = itertools.count(1)


def order_params(**overrides) -> dict:
    params = {"mch_order_no": f"ORD-{next(_order_numbers)}", "product_code": "PHP_COLLECT_D1", "amount": 10000,
              "currency": "PHP"}
    params.update(overrides)
    return {k: v for k, v in params.items() if v is not None}


def create(client, ctx, **overrides) -> tuple[int, dict]:
    return signed_post(client, ctx, CREATE, order_params(**overrides))


def create_ok(client, ctx, **overrides) -> CollectionOrder:
    status, body = create(client, ctx, **overrides)
    assert (status, body["code"]) == (200, "0"), body
    return CollectionOrder.objects.get(platform_order_no=body["data"]["platform_order_no"])


def balances(ctx, currency: str = "PHP") -> dict:
    return merchant_balances(merchant_id=ctx.merchant.pk, currency=currency)


@pytest.fixture
def fee_product(merchant):
    """A PHP D0 collection product with both a fixed fee and a rate, enabled for `merchant`."""
    product = Product.objects.create(code="PHP_COLLECT_FEE", kind=Product.Kind.COLLECTION, currency_id="PHP",
                                     settlement=Product.Settlement.D0, fee_fixed=100, fee_rate_bps=250,
                                     min_amount=500, max_amount=1_000_000)
    MerchantProduct.objects.create(merchant=merchant.merchant, product=product)
    return product
