"""A new merchant currency's review thresholds keep the four-eyes rule (docs/back-office.md, "Two-approval
threshold"): two approvals start well below the payout product's maximum, so the largest payouts below the maximum
need a second reviewer too, not only a payout of exactly the maximum size."""

import pytest

from apps.merchants.models import MerchantCurrency, Product
from apps.payout.services import payout_create
from tests.payout.conftest import fund, payout_params

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("currency", ["PHP", "USD"])
def test_a_new_currencys_two_approval_threshold_is_between_review_and_the_payout_maximum(merchant, currency):
    enabled = MerchantCurrency.objects.get(merchant=merchant.merchant, currency_id=currency)
    product = Product.objects.get(code=f"{currency}_PAYOUT")
    assert enabled.payout_review_threshold < enabled.payout_dual_approval_threshold
    assert enabled.payout_dual_approval_threshold <= product.max_amount // 2


def test_a_large_php_payout_below_the_products_maximum_needs_two_reviewers(merchant):
    product = Product.objects.get(code="PHP_PAYOUT")
    fund(merchant, 2 * product.max_amount)
    below_maximum = payout_create(merchant=merchant.merchant, **payout_params(amount=product.max_amount - 100_00))
    assert (below_maximum.status, below_maximum.approvals_required) == ("FROZEN", 2)
    at_threshold = payout_create(merchant=merchant.merchant, **payout_params(amount=200_000_00))
    assert at_threshold.approvals_required == 2
    under = payout_create(merchant=merchant.merchant, **payout_params(amount=200_000_00 - 1))
    assert (under.status, under.approvals_required) == ("FROZEN", 1)
