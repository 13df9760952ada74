"""End to end in a live deployment with PayMongo (the emulator): a real browser forwarded to the checkout page, a
real Celery worker opening the session and submitting the payout and the refunds, signed webhooks over HTTP, the
merchant's signed callbacks, and the ledger's own check at the end."""

import os
import time

import pytest
from django.test import Client

from apps.channels.models import UpstreamPayin
from apps.collection.models import CollectionOrder, Refund
from apps.ledger.selectors import ledger_verify
from apps.payout.models import Payout
from tests.callbacks.merchant_side import merchant_verifies
from tests.channels.conftest import PAYMONGO_PAYIN_CODE, PAYMONGO_PAYOUT_CODE
from tests.collection.conftest import balances as collection_balances
from tests.collection.conftest import create_ok as pay_create_ok
from tests.conftest import make_merchant
from tests.helpers import assert_ok, screenshot, signed_post
from tests.payout.conftest import PHP_FEE, balances, create, fund, query
from tests.support.browser import CHROMIUM, chromium
from tests.support.wait import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
browser_only = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian chromium (make browsers)")

PHONE_WIDTH = 390
FUNDS = 10_000_000


@pytest.fixture
def phone():
    with chromium() as browser:
        context = browser.new_context(viewport={"width": PHONE_WIDTH, "height": 844}, device_scale_factor=2,
                                      is_mobile=True, has_touch=True)
        yield context.new_page()
        context.close()


def webhook(live_server, code: str) -> str:
    return f"{live_server.url}/channels/paymongo/{code}/webhook"


@pytest.mark.browser
@browser_only
def test_live_payin_forwards_the_browser_to_paymongo_checkout_and_the_paid_webhook_reaches_the_merchant(
        paymongo_channels, merchant, paymongo_emulator, live_server, phone, callback_receiver, live_celery_worker):
    merchant.merchant.collection_callback_url = callback_receiver.url
    merchant.merchant.save(update_fields=["collection_callback_url"])
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=123456, attach="cart=42")
    # pay/create opened the checkout session (after commit, in the worker), before the payer came
    opened = wait_until(lambda: UpstreamPayin.objects.filter(platform_order_no=order.platform_order_no).first(),
                        what="the checkout session opened after pay/create")
    response = phone.goto(f"{live_server.url}/pay/{order.pay_token}")
    [session] = paymongo_emulator.sessions_by_reference(order.platform_order_no)
    assert session["id"] == opened.reference
    assert phone.url == session["attributes"]["checkout_url"] and response.status == 200
    assert phone.locator("h1").inner_text() == "PayMongo checkout (emulator)"
    assert phone.locator("#amount").inner_text() == "123456"  # centavos
    assert phone.locator("#methods").inner_text() == "gcash paymaya grab_pay qrph"
    screenshot(phone, "pay-page-live-forwarded-to-paymongo")

    paymongo_emulator.pay_session(session["id"], method="qrph")
    reply = paymongo_emulator.session_webhook(session["id"], webhook(live_server, PAYMONGO_PAYIN_CODE))
    assert (reply.status_code, reply.json()["changed"]) == (200, "paid")
    order.refresh_from_db()
    assert order.status == CollectionOrder.Status.SUCCESS
    [received] = callback_receiver.wait_for(1, timeout=20)
    body = received.body
    assert {k: body[k] for k in ("platform_order_no", "amount", "currency", "status", "attach")} == {
        "platform_order_no": order.platform_order_no, "amount": 123456, "currency": "PHP", "status": "SUCCESS",
        "attach": "cart=42"}
    assert merchant_verifies(body)
    assert collection_balances(merchant)["available"] == 123456 - order.fee
    assert ledger_verify()["ok"]


def test_live_payout_goes_to_paymongo_by_the_worker_and_the_merchant_is_called_back(
        paymongo_channels, bootstrapped, rsa_keys, paymongo_emulator, live_server, callback_receiver,
        live_celery_worker):
    shop = make_merchant(rsa_keys[2], name="Live Shop", payout_callback_url=callback_receiver.url)
    fund(shop, FUNDS)
    status, body = create(Client(), shop, amount=25_000, payee_account="09171234567", bank_code="MAYA")
    assert (status, body["data"]["status"]) == (200, "APPROVED")
    number = body["data"]["platform_order_no"]
    payout = wait_until(lambda: (p := Payout.objects.get(platform_order_no=number)).upstream_reference and p,
                        what="the payout submitted to PayMongo")
    [upstream] = paymongo_emulator.transfers_by_reference(number)
    assert (upstream["id"], upstream["attributes"]["provider"], upstream["attributes"]["destination_account"]["bic"]) \
        == (payout.upstream_reference, "instapay", "PAPHPHM1XXX")
    assert balances(shop) == {"available": FUNDS - 25_000 - PHP_FEE, "settling": 0, "frozen": 25_000 + PHP_FEE}

    paymongo_emulator.settle_transfer(upstream["id"], "succeeded")
    reply = paymongo_emulator.transfer_webhook(upstream["id"], webhook(live_server, PAYMONGO_PAYOUT_CODE))
    assert (reply.status_code, reply.json()["changed"]) == (200, "succeeded")
    [success] = [r.body for r in callback_receiver.wait_for(1)]
    assert merchant_verifies(success)
    assert (success["status"], success["amount"], success["fee"]) == ("SUCCESS", 25_000, PHP_FEE)
    assert balances(shop) == {"available": FUNDS - 25_000 - PHP_FEE, "settling": 0, "frozen": 0}
    assert query(Client(), shop, platform_order_no=number)[1]["data"]["status"] == "SUCCESS"
    assert len(paymongo_emulator.transfers) == 1
    assert ledger_verify()["ok"]


def test_payout_refused_by_paymongo_through_the_worker_is_failed_with_the_funds_back(
        paymongo_channels, bootstrapped, rsa_keys, paymongo_emulator, live_server, callback_receiver,
        live_celery_worker):
    shop = make_merchant(rsa_keys[2], name="Live Shop", payout_callback_url=callback_receiver.url)
    fund(shop, FUNDS)
    paymongo_emulator.fail_next("batch_transfers", "400")
    status, body = create(Client(), shop, amount=25_000, payee_account="0012345678", bank_code="BDO")
    number = body["data"]["platform_order_no"]
    payout = wait_until(lambda: (p := Payout.objects.get(platform_order_no=number)).status == "FAILED" and p,
                        what="the refused payout failed")
    assert payout.fail_reason == "refused upstream: parameter_invalid"
    [failed] = [r.body for r in callback_receiver.wait_for(1)]
    assert merchant_verifies(failed) and failed["status"] == "FAILED"
    assert balances(shop) == {"available": FUNDS, "settling": 0, "frozen": 0}
    assert not paymongo_emulator.transfers and ledger_verify()["ok"]


def test_live_refund_in_parts_goes_to_paymongo_by_the_worker_and_each_is_called_back_once(
        paymongo_channels, merchant, paymongo_emulator, live_server, callback_receiver, live_celery_worker):
    merchant.merchant.collection_callback_url = callback_receiver.url
    merchant.merchant.save(update_fields=["collection_callback_url"])
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=100_000)
    opened = wait_until(lambda: UpstreamPayin.objects.filter(platform_order_no=order.platform_order_no).first(),
                        what="the checkout session opened after pay/create")
    paymongo_emulator.pay_session(opened.reference, method="gcash")
    reply = paymongo_emulator.session_webhook(opened.reference, webhook(live_server, PAYMONGO_PAYIN_CODE))
    assert (reply.status_code, reply.json()["changed"]) == (200, "paid")
    available = collection_balances(merchant)["available"]
    numbers = []
    for mch_refund_no, amount in (("RF-30", 30_000), ("RF-50", 50_000)):
        data = assert_ok(signed_post(Client(), merchant, "/openapi/v1/refund/create",
                                     {"mch_order_no": order.mch_order_no, "mch_refund_no": mch_refund_no,
                                      "amount": amount, "reason": "requested_by_customer"}))
        numbers.append(data["refund_no"])
    assert data["refundable"] == 20_000
    status, body = signed_post(Client(), merchant, "/openapi/v1/refund/create",
                               {"mch_order_no": order.mch_order_no, "mch_refund_no": "RF-OVER", "amount": 20_001})
    assert (status, body["code"]) == (422, "2008")
    refunds = [wait_until(lambda n=n: (r := Refund.objects.get(refund_no=n)).upstream_reference and r,
                          what=f"refund {n} submitted to PayMongo by the worker") for n in numbers]
    [payment] = paymongo_emulator.sessions[opened.reference]["attributes"]["payments"]
    assert sorted(r["attributes"]["amount"] for r in paymongo_emulator.refunds_of(payment["id"])) == [30_000, 50_000]
    assert collection_balances(merchant) == {"available": available - 80_000, "settling": 0, "frozen": 80_000}

    for refund in refunds:
        paymongo_emulator.settle_refund(refund.upstream_reference, "succeeded")
        for _ in range(2):  # PayMongo's retry of the same event changes nothing
            assert paymongo_emulator.refund_webhook(refund.upstream_reference,
                                                    webhook(live_server, PAYMONGO_PAYIN_CODE)).status_code == 200

    def refund_callbacks(number: str) -> list[dict]:
        return [r.body for r in callback_receiver.requests if r.body and r.body.get("refund_no") == number]

    wait_until(lambda: all(refund_callbacks(n) for n in numbers), what="both refund callbacks")
    time.sleep(1)  # a second delivery would have come by now
    for number, amount in zip(numbers, (30_000, 50_000)):
        [callback] = refund_callbacks(number)
        assert merchant_verifies(callback)
        assert (callback["status"], callback["amount"], callback["platform_order_no"]) == (
            "SUCCESS", amount, order.platform_order_no)
    assert collection_balances(merchant) == {"available": available - 80_000, "settling": 0, "frozen": 0}
    assert len(paymongo_emulator.refunds) == 2
    assert ledger_verify()["ok"]
