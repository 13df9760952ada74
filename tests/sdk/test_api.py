"""The SDK client against a live platform: typed results, and every error the API produces as its own class."""

import socket
import time

import pytest

import payments_merchant as pm
from apps.collection.services import collection_notify_paid
from apps.ledger.services import balance_adjust
from tests.sdk.conftest import sdk_client

pytestmark = pytest.mark.django_db(transaction=True)

PAYOUT = dict(product_code="PHP_PAYOUT", currency="PHP", payee_name="Juan dela Cruz", payee_account="0012345678",
              bank_code="BDO")


def fund(merchant, amount: int) -> None:
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=amount, reason="sdk test")


def test_balance_and_currencies_are_typed(client, merchant):
    fund(merchant, 4200)
    assert client.balance("PHP") == pm.Balance(currency="PHP", available=4200, settling=0)
    assert client.balance() == pm.Balance(currency="PHP", available=4200, settling=0)  # the platform's default
    currencies = {c.code: c for c in client.currencies()}
    assert currencies["PHP"].minor_unit == 2 and currencies["PHP"].active is True
    assert isinstance(currencies["PHP"], pm.Currency)


def test_pay_create_then_query_until_paid(client):
    order = client.pay_create(mch_order_no="sdk-pay-1", product_code="PHP_COLLECT_D1", amount=10000, currency="PHP",
                              subject="SDK order", attach="cart=7", expire_seconds=900)
    assert isinstance(order, pm.PayOrder)
    assert (order.mch_order_no, order.amount, order.currency, order.status) == ("sdk-pay-1", 10000, "PHP", "CREATED")
    assert order.pay_url.startswith("http") and order.expire_at > time.time() + 800
    # An identical create replays the same order.
    assert client.pay_create(mch_order_no="sdk-pay-1", product_code="PHP_COLLECT_D1", amount=10000, currency="PHP",
                             subject="SDK order", attach="cart=7", expire_seconds=900) == order

    created = client.pay_query(mch_order_no="sdk-pay-1")
    assert (created.status, created.paid_at, created.attach) == ("CREATED", None, "cart=7")
    collection_notify_paid(platform_order_no=order.platform_order_no)  # what the sandbox Pay button does
    paid = client.pay_query(platform_order_no=order.platform_order_no)
    assert isinstance(paid, pm.PayQueryResult)
    assert paid.status == "SUCCESS" and isinstance(paid.paid_at, int) and paid.mch_order_no == "sdk-pay-1"
    assert client.balance("PHP").settling == 10000


def test_payout_create_then_query(client, merchant):
    fund(merchant, 10_000_000)
    payout = client.payout_create(mch_order_no="sdk-po-1", amount=25000, attach="batch 3", **PAYOUT)
    assert isinstance(payout, pm.PayoutOrder)
    assert (payout.status, payout.review_required, payout.amount, payout.fee) == ("APPROVED", False, 25000, 1000)
    found = client.payout_query(mch_order_no="sdk-po-1")
    assert isinstance(found, pm.PayoutQueryResult)
    assert found.platform_order_no == payout.platform_order_no and found.attach == "batch 3"
    assert found.status in ("APPROVED", "PROCESSING", "SUCCESS")
    assert client.balance("PHP").available == 10_000_000 - 25000 - 1000

    large = client.payout_create(mch_order_no="sdk-po-2", amount=5_000_000, **PAYOUT)  # the review threshold
    assert (large.status, large.review_required) == ("FROZEN", True)


def test_refund_create_then_query_are_typed_and_refusals_raise_their_classes(client, merchant):
    order = client.pay_create(mch_order_no="sdk-rf-pay", product_code="PHP_COLLECT_D0", amount=10000,
                              currency="PHP")
    unpaid = client.pay_create(mch_order_no="sdk-rf-unpaid", product_code="PHP_COLLECT_D0", amount=10000,
                               currency="PHP")
    collection_notify_paid(platform_order_no=order.platform_order_no)
    refund = client.refund_create(mch_order_no="sdk-rf-pay", mch_refund_no="sdk-rf-1", amount=3000,
                                  reason="returned")
    assert isinstance(refund, pm.Refund)
    assert (refund.status, refund.amount, refund.refunded_total, refund.refundable, refund.finished_at) == (
        "PROCESSING", 3000, 3000, 7000, None)
    assert refund.platform_order_no == order.platform_order_no and refund.mch_order_no == "sdk-rf-pay"
    assert client.refund_create(platform_order_no=order.platform_order_no, mch_refund_no="sdk-rf-1", amount=3000,
                                reason="returned").refund_no == refund.refund_no  # a replay
    found = client.refund_query(refund_no=refund.refund_no)
    assert found.mch_refund_no == "sdk-rf-1" and found.currency == "PHP"

    error = call_error(lambda: client.refund_create(mch_order_no="sdk-rf-pay", mch_refund_no="sdk-rf-2",
                                                    amount=7001))
    assert (type(error), error.code, error.http_status) == (pm.RefundExceedsRefundableError, "2008", 422)
    error = call_error(lambda: client.refund_create(mch_order_no="sdk-rf-unpaid", mch_refund_no="sdk-rf-3",
                                                    amount=1))
    assert (type(error), error.code, error.http_status) == (pm.OrderNotRefundableError, "2007", 422)
    error = call_error(lambda: client.refund_query(mch_refund_no="never"))
    assert type(error) is pm.OrderNotFoundError


def call_error(call) -> pm.PaymentsError:
    with pytest.raises(pm.PaymentsError) as caught:
        call()
    return caught.value


@pytest.mark.parametrize(("make_call", "error_class", "code", "http_status"), [
    (lambda c: c.balance("php"), pm.InvalidRequestError, "1000", 400),
    (lambda c: c.balance("XXX"), pm.CurrencyNotAvailableError, "1001", 422),
    (lambda c: c.pay_create(mch_order_no="e-1", product_code="NO_SUCH", amount=10000, currency="PHP"),
     pm.ProductNotAvailableError, "1002", 422),
    (lambda c: c.pay_create(mch_order_no="e-2", product_code="PHP_COLLECT_D1", amount=1, currency="PHP"),
     pm.AmountOutOfRangeError, "1003", 422),
    (lambda c: c.call("no/such/endpoint", {}), pm.EndpointNotFoundError, "1004", 404),
    (lambda c: c.pay_query(mch_order_no="never-created"), pm.OrderNotFoundError, "2002", 404),
    (lambda c: c.payout_create(mch_order_no="e-3", amount=10000, **PAYOUT), pm.InsufficientBalanceError, "2003", 422),
    (lambda c: c.payout_create(mch_order_no="e-4", amount=10000, **{**PAYOUT, "bank_code": "NOPE"}),
     pm.UnknownBankCodeError, "2006", 422),
], ids=["1000", "1001", "1002", "1003", "1004", "2002", "2003", "2006"])
def test_business_errors_raise_their_class(client, make_call, error_class, code, http_status):
    error = call_error(lambda: make_call(client))
    assert type(error) is error_class
    assert (error.code, error.http_status) == (code, http_status) and error.msg


def test_duplicate_order_with_other_parameters_raises_2001(client):
    client.pay_create(mch_order_no="dup-1", product_code="PHP_COLLECT_D1", amount=10000, currency="PHP")
    error = call_error(lambda: client.pay_create(mch_order_no="dup-1", product_code="PHP_COLLECT_D1", amount=20000,
                                                 currency="PHP"))
    assert (type(error), error.code, error.http_status) == (pm.DuplicateOrderError, "2001", 409)


def test_signature_by_another_key_raises_1101(live_server, merchant, rsa_keys):
    error = call_error(lambda: sdk_client(live_server, merchant, private_key=rsa_keys[1]).balance("PHP"))
    assert (type(error), error.code, error.http_status) == (pm.InvalidSignatureError, "1101", 401)


def test_clock_off_by_more_than_300_s_raises_1102(live_server, merchant):
    class Late(pm.PaymentsClient):
        def now(self) -> int:
            return int(time.time()) - 1000

    client = Late(api_root=live_server.url, merchant_no=merchant.merchant_no, app_id=merchant.app_id,
                  private_key=merchant.private_key)
    error = call_error(lambda: client.balance("PHP"))
    assert (type(error), error.code, error.http_status) == (pm.TimestampOutOfToleranceError, "1102", 401)


def test_reused_nonce_raises_1103(live_server, merchant):
    class SameNonce(pm.PaymentsClient):
        def new_nonce(self) -> str:
            return "the-same-nonce-every-time"

    client = SameNonce(api_root=live_server.url, merchant_no=merchant.merchant_no, app_id=merchant.app_id,
                       private_key=merchant.private_key)
    client.balance("PHP")
    error = call_error(lambda: client.balance("PHP"))
    assert (type(error), error.code, error.http_status) == (pm.NonceReusedError, "1103", 401)


def test_unknown_key_version_raises_1104(live_server, merchant):
    error = call_error(lambda: sdk_client(live_server, merchant, key_version=99).balance("PHP"))
    assert (type(error), error.code, error.http_status) == (pm.UnknownCredentialsError, "1104", 401)


def test_disabled_merchant_raises_1105(client, merchant):
    merchant.merchant.is_active = False
    merchant.merchant.save(update_fields=["is_active"])
    error = call_error(lambda: client.balance("PHP"))
    assert (type(error), error.code, error.http_status) == (pm.MerchantDisabledError, "1105", 403)


def test_rate_limit_raises_1106(client, settings):
    settings.RATE_LIMIT_PER_SECOND = 1
    # Two calls in one second are enough; a few more in case the first two straddle a second boundary.
    error = call_error(lambda: [client.balance("PHP") for _ in range(6)])
    assert (type(error), error.code, error.http_status) == (pm.RateLimitedError, "1106", 429)


@pytest.mark.parametrize("code", sorted(pm.ERRORS_BY_CODE))
def test_every_contract_code_maps_to_its_class(code):
    error = pm.errors.error_for(code, "a message", 400)
    assert type(error) is pm.ERRORS_BY_CODE[code] and error.code == code and isinstance(error, pm.PaymentsError)


def test_the_sdk_knows_every_code_of_contract_section_3():
    assert set(pm.ERRORS_BY_CODE) == {"1000", "1001", "1002", "1003", "1004", "1101", "1102", "1103", "1104", "1105",
                                      "1106", "2001", "2002", "2003", "2006", "2007", "2008", "9999"}
    unknown = pm.errors.error_for("7777", "new", 418)
    assert type(unknown) is pm.PaymentsError
    assert (unknown.code, unknown.msg, unknown.http_status) == ("7777", "new", 418)


def test_no_answer_is_a_transport_error_within_the_timeout(merchant):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    client = pm.PaymentsClient(api_root=f"http://127.0.0.1:{port}", merchant_no=merchant.merchant_no,
                               app_id=merchant.app_id, private_key=merchant.private_key, timeout=2)
    error = call_error(lambda: client.balance("PHP"))
    assert type(error) is pm.TransportError and error.http_status is None
