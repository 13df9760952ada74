"""A refused balance adjustment names its amount as staff read money (the currency's format) and as they typed it
(minor units), and moves nothing."""

import pytest

from apps.ledger.selectors import merchant_balances
from apps.ledger.services import balance_adjust

pytestmark = pytest.mark.django_db


def test_a_debit_beyond_available_is_refused_in_the_currencys_format_and_moves_nothing(merchant):
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=3000, reason="top-up")
    with pytest.raises(ValueError) as refused:
        balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=-3001, reason="too much")
    assert str(refused.value) == "debit of ₱30.01 PHP (3001 minor units) would make available PHP negative"
    assert merchant_balances(merchant_id=merchant.merchant.pk, currency="PHP")["available"] == 3000
