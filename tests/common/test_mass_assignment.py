"""Mass assignment: fields a merchant may not set, sent anyway inside a correctly signed body, change nothing.

The order belongs to the signer, its status is the computed one, its fee is the product's, its number is the
platform's. `merchant_no` is a signed common field: naming another merchant while signing with my own key is
refused (1104 or 1101) and never acts as that merchant.
"""

import pytest

from apps.collection.models import CollectionOrder
from apps.collection.services import collection_notify_paid
from apps.ledger.models import Posting
from apps.ledger.selectors import merchant_balances
from apps.ledger.services import balance_adjust
from apps.merchants.models import MerchantProduct, Product
from apps.payout.models import Payout
from tests.helpers import assert_error, assert_ok, post_json, signed_post

pytestmark = pytest.mark.django_db

PAY_CREATE = "/openapi/v1/pay/create"
PAYOUT_CREATE = "/openapi/v1/payout/create"
BALANCE = "/openapi/v1/balance"
PHP_PAYOUT_FEE = 1000  # PHP_PAYOUT: fee_fixed 10.00 PHP, no rate
PHP_REVIEW_THRESHOLD = 5_000_000


def forged_fields(other) -> dict:
    """Scalar values for everything an order has that a merchant must not choose."""
    return {
        "status": "SUCCESS", "fee": 0, "paid_at": 1700000000, "settled_at": 1700000000, "settlement": "D0",
        "platform_order_no": "C20240101000000FORGEDFORGED1234", "pay_token": "forged-token", "expire_at": 4102444800,
        "merchant": other.merchant_no, "merchant_id": other.merchant.pk, "review_required": False,
        "finished_at": 1700000000, "reversed_at": 1700000000, "reversal_amount": 1, "fee_refund": 1, "hold": 1,
        "risk_reasons": "", "reviewed_by": 1, "upstream_reference": "FORGED", "net_amount": 10_000,
        "fail_reason": "forged", "channel": "SANDBOX_PHP_PAYIN", "id": 1, "pk": 1,
    }


@pytest.fixture
def fee_product(merchant):
    product = Product.objects.create(code="PHP_COLLECT_FEE_SEC", kind=Product.Kind.COLLECTION, currency_id="PHP",
                                     settlement=Product.Settlement.D1, fee_fixed=100, fee_rate_bps=250,
                                     min_amount=500, max_amount=1_000_000)
    MerchantProduct.objects.create(merchant=merchant.merchant, product=product)
    return product


def test_pay_create_ignores_status_fee_paid_at_numbers_and_owner_sent_in_the_body(client, merchant, other_merchant,
                                                                                fee_product):
    body = {"mch_order_no": "MA-1", "product_code": fee_product.code, "amount": 10_000, "currency": "PHP",
            **forged_fields(other_merchant)}
    data = assert_ok(signed_post(client, merchant, PAY_CREATE, body))
    assert data["status"] == "CREATED"
    assert data["platform_order_no"] != body["platform_order_no"]
    assert data["expire_at"] != body["expire_at"]
    assert "forged-token" not in data["pay_url"]

    order = CollectionOrder.objects.get(platform_order_no=data["platform_order_no"])
    assert order.merchant_id == merchant.merchant.pk
    assert (order.status, order.fee, order.settlement, order.paid_at, order.settled_at, order.upstream_reference) == (
        "CREATED", 100 + 250, "D1", None, None, "")  # fee = 100 + ceil(10000 × 250 / 10000)
    assert not CollectionOrder.objects.filter(merchant=other_merchant.merchant).exists()
    assert not Posting.objects.exists()  # "status: SUCCESS" credited nothing

    # Paid for real: credited amount − the product's fee, into settling (the product's D1, not the body's D0).
    collection_notify_paid(platform_order_no=order.platform_order_no)
    assert merchant_balances(merchant_id=merchant.merchant.pk, currency="PHP") == {
        "available": 0, "settling": 10_000 - 350, "frozen": 0}
    assert merchant_balances(merchant_id=other_merchant.merchant.pk, currency="PHP") == {
        "available": 0, "settling": 0, "frozen": 0}


def test_payout_create_ignores_status_fee_review_flag_and_owner_sent_in_the_body(client, merchant, other_merchant):
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=10_000_000, reason="test funds")
    body = {"mch_order_no": "MA-P1", "product_code": "PHP_PAYOUT", "amount": PHP_REVIEW_THRESHOLD, "currency": "PHP",
            "payee_name": "Payee", "payee_account": "0012345678", "bank_code": "BDO", **forged_fields(other_merchant)}
    data = assert_ok(signed_post(client, merchant, PAYOUT_CREATE, body))
    # At the review threshold: FROZEN for review whatever "status" and "review_required" said.
    assert (data["status"], data["review_required"], data["fee"]) == ("FROZEN", True, PHP_PAYOUT_FEE)
    assert data["platform_order_no"] != body["platform_order_no"]

    payout = Payout.objects.get(platform_order_no=data["platform_order_no"])
    assert payout.merchant_id == merchant.merchant.pk
    assert (payout.fee, payout.finished_at, payout.reversed_at, payout.reversal_amount, payout.fee_refund,
            payout.reviewed_by, payout.upstream_reference, payout.fail_reason) == (
        PHP_PAYOUT_FEE, None, None, None, None, None, "", "")
    assert payout.hold.amount == PHP_REVIEW_THRESHOLD + PHP_PAYOUT_FEE
    assert merchant_balances(merchant_id=merchant.merchant.pk, currency="PHP") == {
        "available": 10_000_000 - PHP_REVIEW_THRESHOLD - PHP_PAYOUT_FEE, "settling": 0,
        "frozen": PHP_REVIEW_THRESHOLD + PHP_PAYOUT_FEE}
    assert not Payout.objects.filter(merchant=other_merchant.merchant).exists()


def test_balance_with_another_merchants_id_in_the_body_is_still_my_balance(client, merchant, other_merchant):
    balance_adjust(merchant_no=other_merchant.merchant_no, currency="PHP", amount=777_777, reason="test funds")
    data = assert_ok(signed_post(client, merchant, BALANCE, {"currency": "PHP", **forged_fields(other_merchant)}))
    assert (data["available"], data["settling"]) == (0, 0)


@pytest.mark.parametrize("path, business", [
    (PAY_CREATE, {"mch_order_no": "X-1", "product_code": "PHP_COLLECT_D1", "amount": 10_000, "currency": "PHP"}),
    (PAYOUT_CREATE, {"mch_order_no": "X-1", "product_code": "PHP_PAYOUT", "amount": 10_000, "currency": "PHP",
                     "payee_name": "Payee", "payee_account": "0012345678", "bank_code": "BDO"}),
    (BALANCE, {"currency": "PHP"}),
], ids=["pay-create", "payout-create", "balance"])
def test_another_merchant_no_signed_with_my_key_is_refused_and_acts_as_nobody(client, merchant, other_merchant,
                                                                              path, business):
    balance_adjust(merchant_no=other_merchant.merchant_no, currency="PHP", amount=1_000_000, reason="test funds")
    before = merchant_balances(merchant_id=other_merchant.merchant.pk, currency="PHP")
    # Their merchant_no with my app: the app is not theirs.
    assert_error(signed_post(client, merchant, path, business, merchant_no=other_merchant.merchant_no), "1104", 401)
    # Their merchant_no and app_id, signed with my key: the signature does not verify with their key.
    assert_error(signed_post(client, merchant, path, business, merchant_no=other_merchant.merchant_no,
                             app_id=other_merchant.app_id), "1101", 401)
    assert not CollectionOrder.objects.exists() and not Payout.objects.exists()
    assert merchant_balances(merchant_id=other_merchant.merchant.pk, currency="PHP") == before


def test_a_body_signed_by_me_cannot_be_replayed_as_another_merchant(client, merchant, other_merchant):
    """Changing merchant_no after signing breaks the signature: the common fields are signed like the rest."""
    body = merchant.signed_body({"mch_order_no": "X-2", "product_code": "PHP_COLLECT_D1", "amount": 10_000,
                                 "currency": "PHP"})
    body.update(merchant_no=other_merchant.merchant_no, app_id=other_merchant.app_id)
    assert_error(post_json(client, PAY_CREATE, body), "1101", 401)
    assert not CollectionOrder.objects.exists()
