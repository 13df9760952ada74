"""Xendit's official SDK (xendit-python 7.0.0, generated from Xendit's OpenAPI specs) against our Xendit emulator:
its own client (host = the emulator) makes every call our adapter makes, and its models read every answer: invoices
in every state, payouts in every state, lists, the payout channel list, reused idempotency keys and errors
The conftest's emulator fixture also reads every answer of every other Xendit test this way."""

import json
from datetime import timedelta
from decimal import Decimal

import pytest
import xendit
from django.test import Client
from xendit.invoice.model.create_invoice_request import CreateInvoiceRequest
from xendit.invoice.model.invoice import Invoice
from xendit.invoice.model.invoice_status import InvoiceStatus
from xendit.payout.model.channel import Channel as PayoutChannel
from xendit.payout.model.create_payout_request import CreatePayoutRequest
from xendit.payout.model.digital_payout_channel_properties import DigitalPayoutChannelProperties
from xendit.payout.model.get_payouts200_response import GetPayouts200Response
from xendit.payout.model.get_payouts200_response_data_inner import GetPayouts200ResponseDataInner
from xendit.refund.model.create_refund import CreateRefund
from xendit.refund.model.refund import Refund
from xendit.refund.model.refund_callback import RefundCallback
from xendit.refund.model.refund_list import RefundList

from apps.channels.base import UpstreamUnavailable
from apps.channels.services import SEED_BANK_CODES
from apps.channels.xendit import PAYOUT_CHANNEL_CODES, payout_channel_code
from tests.channels.xendit_emulator import PAYOUT_FAILURE_CODES, REFUND_FAILURE_CODES, XenditEmulator
from tests.channels.xendit_sdk import (
    SUCCESS_TYPES,
    assert_sdk_reads_every_answer,
    sdk_apis,
    sdk_read,
    sdk_refunds,
    sdk_type,
)


@pytest.fixture
def emulator():
    emulator = XenditEmulator(stall_seconds=0.5).start()
    yield emulator
    emulator.stop()


def an_invoice_request(external_id: str, amount: float = 1500.0) -> CreateInvoiceRequest:
    return CreateInvoiceRequest(external_id=external_id, amount=amount, currency="PHP", invoice_duration=900.0,
                                description="Order 1", success_redirect_url="https://shop.example/back",
                                failure_redirect_url="https://shop.example/back")


def a_payout_request(reference_id: str, amount: float = 1500.0, channel_code: str = "PH_GCASH") -> CreatePayoutRequest:
    return CreatePayoutRequest(
        reference_id=reference_id, channel_code=channel_code, amount=amount, currency="PHP",
        channel_properties=DigitalPayoutChannelProperties(account_number="09171234567",
                                                          account_holder_name="Juan dela Cruz"),
        description="Payout 1")


def sdk_error(call) -> xendit.XenditSdkException:
    with pytest.raises(xendit.XenditSdkException) as raised:
        call()
    return raised.value


# --- invoices -----------------------------------------------------------------------------------------------


def test_the_sdk_creates_and_reads_invoices_in_every_state(emulator):
    invoices, _ = sdk_apis(emulator)
    created = invoices.create_invoice(create_invoice_request=an_invoice_request("C-1"))  # POST /v2/invoices/
    assert isinstance(created, Invoice) and created.status == InvoiceStatus("PENDING")
    assert (created.external_id, created.amount, str(created.currency)) == ("C-1", 1500.0, "PHP")
    assert created.invoice_url.endswith(f"/web/invoices/{created.id}")
    assert [str(e.ewallet_type) for e in created.available_ewallets] == ["GCASH", "PAYMAYA", "GRABPAY"]
    assert [str(q.qr_code_type) for q in created.available_qr_codes] == ["QRPH"]
    assert created.should_send_email is False and created.success_redirect_url == "https://shop.example/back"

    emulator.pay_invoice(created.id)
    paid = invoices.get_invoice_by_id(created.id)
    assert paid.status == InvoiceStatus("PAID") and str(paid.payment_method) == "EWALLET"
    emulator.settle_invoice(created.id)
    assert invoices.get_invoice_by_id(created.id).status == InvoiceStatus("SETTLED")

    other = invoices.create_invoice(create_invoice_request=an_invoice_request("C-2", amount=0.01))
    expired = invoices.expire_invoice(other.id)  # POST /invoices/{id}/expire!
    assert expired.status == InvoiceStatus("EXPIRED") and expired.amount == 0.01
    assert invoices.get_invoice_by_id(other.id).status == InvoiceStatus("EXPIRED")

    [listed] = invoices.get_invoices(external_id="C-1")  # GET /v2/invoices?external_id= : a list
    assert (listed.id, listed.status) == (created.id, InvoiceStatus("SETTLED"))
    assert {i.id for i in invoices.get_invoices()} == {created.id, other.id}
    assert invoices.get_invoices(external_id="nobody") == []
    assert assert_sdk_reads_every_answer(emulator) == 9


# --- payouts ------------------------------------------------------------------------------------------------


def test_the_sdk_creates_and_reads_payouts_in_every_documented_state(emulator):
    _, payouts = sdk_apis(emulator)
    created = payouts.create_payout("PO-1", create_payout_request=a_payout_request("PO-1"))  # POST /v2/payouts
    assert isinstance(created, GetPayouts200ResponseDataInner) and created.status == "ACCEPTED"
    assert "failure_code" not in created  # documented: only a FAILED payout has one (the SDK refuses null)
    assert (created.reference_id, created.amount, created.channel_code) == ("PO-1", 1500.0, "PH_GCASH")
    assert created.channel_properties.account_number == "09171234567"
    for status in ("REQUESTED", "LOCKED", "SUCCEEDED", "REVERSED"):
        emulator.settle_payout(created.id, status)
        read = payouts.get_payout_by_id(created.id)  # GET /v2/payouts/{id}
        assert read.status == status and "failure_code" not in read
    for failure_code in PAYOUT_FAILURE_CODES:
        emulator.settle_payout(created.id, "FAILED", failure_code)
        read = payouts.get_payout_by_id(created.id)
        assert (read.status, read.failure_code) == ("FAILED", failure_code)

    cancelled = payouts.create_payout("PO-2", create_payout_request=a_payout_request("PO-2"))
    assert payouts.cancel_payout(cancelled.id).status == "CANCELLED"  # POST /v2/payouts/{id}/cancel
    assert payouts.get_payout_by_id(cancelled.id).status == "CANCELLED"
    refused = sdk_error(lambda: payouts.cancel_payout(created.id))  # FAILED: too late to cancel
    assert (refused.status, refused.errorCode) == ("400", "CANCELLATION_NOT_ALLOWED_ERROR")

    listed = payouts.get_payouts("PO-1")  # GET /v2/payouts?reference_id=
    assert isinstance(listed, GetPayouts200Response) and listed.has_more is False
    assert [(p.id, p.status) for p in listed.data] == [(created.id, "FAILED")]
    assert payouts.get_payouts("nobody").data == []
    # A state no one documents cannot be set: the SDK would refuse it.
    with pytest.raises(ValueError):
        emulator.settle_payout(created.id, "PAID")
    with pytest.raises(ValueError):
        emulator.settle_payout(created.id, "FAILED", "ACCOUNT_CLOSED")
    assert assert_sdk_reads_every_answer(emulator) == 16


def test_a_reused_idempotency_key_is_answered_as_xendit_documents(emulator):
    _, payouts = sdk_apis(emulator)
    first = payouts.create_payout("KEY-1", create_payout_request=a_payout_request("PO-1"))
    # The same key and the same body: the first attempt's payout again, nothing new.
    again = payouts.create_payout("KEY-1", create_payout_request=a_payout_request("PO-1"))
    assert (again.id, again.status) == (first.id, "ACCEPTED")
    # The same key and another body: DUPLICATE_ERROR, nothing created.
    other = sdk_error(lambda: payouts.create_payout("KEY-1", create_payout_request=a_payout_request("PO-1", 1600.0)))
    assert (other.status, other.errorCode) == ("409", "DUPLICATE_ERROR") and other.errorMessage
    assert list(emulator.payouts) == [first.id] and emulator.idempotency_keys == {"KEY-1": first.id}
    # A key is the payout's, whatever its state: a replay after it settled answers it as it is now.
    emulator.settle_payout(first.id, "SUCCEEDED")
    assert payouts.create_payout("KEY-1", create_payout_request=a_payout_request("PO-1")).status == "SUCCEEDED"
    # The scripted harder upstream refuses every reuse.
    emulator.reused_key = "409"
    refused = sdk_error(lambda: payouts.create_payout("KEY-1", create_payout_request=a_payout_request("PO-1")))
    assert (refused.status, refused.errorCode) == ("409", "DUPLICATE_ERROR")
    assert len(emulator.payouts) == 1
    assert_sdk_reads_every_answer(emulator)


def test_the_sdk_reads_the_payout_channel_list_and_its_filters(emulator):
    _, payouts = sdk_apis(emulator)
    php = payouts.get_payout_channels(currency="PHP")  # GET /payouts_channels
    assert php and all(isinstance(c, PayoutChannel) and c.currency == "PHP" for c in php)
    gcash = next(c for c in php if c.channel_code == "PH_GCASH")
    assert (str(gcash.channel_category), gcash.channel_name) == ("EWALLET", "GCash")
    assert (gcash.amount_limits.minimum, gcash.amount_limits.maximum, gcash.amount_limits.minimum_increment) == (
        1.0, 50000.0, 0.01)
    wallets = payouts.get_payout_channels(currency="PHP", channel_category=["EWALLET"])
    assert {c.channel_code for c in wallets} == {"PH_GCASH", "PH_GRABPAY", "PH_PAYMAYA"}
    assert [c.channel_code for c in payouts.get_payout_channels(channel_code="PH_MET")] == ["PH_MET"]
    assert {c.currency for c in payouts.get_payout_channels()} == {"PHP", "IDR", "THB"}
    # Our bank-code map, seeded PHP bank codes included, names only channels Xendit lists for PHP.
    assert set(PAYOUT_CHANNEL_CODES.values()) <= {c.channel_code for c in php}
    assert {payout_channel_code(code) for code, _, _ in SEED_BANK_CODES["PHP"]} <= {c.channel_code for c in php}
    # A payout to a channel Xendit does not list is refused (the adapter's configuration check keeps ours out).
    refused = sdk_error(lambda: payouts.create_payout(
        "K", create_payout_request=a_payout_request("PO", channel_code="PH_NOPE")))
    assert (refused.status, refused.errorCode) == ("400", "API_VALIDATION_ERROR")
    assert_sdk_reads_every_answer(emulator)


# --- errors -------------------------------------------------------------------------------------------------


def test_every_error_answer_is_read_by_the_sdk(emulator):
    invoices, payouts = sdk_apis(emulator)
    wrong_invoices, wrong_payouts = sdk_apis(emulator, api_key="xnd_wrong")
    cases = [
        (lambda: wrong_invoices.get_invoice_by_id("x"), "401", "INVALID_API_KEY"),
        (lambda: wrong_payouts.get_payouts("x"), "401", "INVALID_API_KEY"),
        (lambda: invoices.get_invoice_by_id("nope"), "404", "INVOICE_NOT_FOUND_ERROR"),
        (lambda: invoices.expire_invoice("nope"), "404", "INVOICE_NOT_FOUND_ERROR"),
        (lambda: invoices.create_invoice(create_invoice_request=an_invoice_request("C", amount=0.0)), "400",
         "API_VALIDATION_ERROR"),
        (lambda: payouts.get_payout_by_id("disb-nope"), "404", "DATA_NOT_FOUND"),
        (lambda: payouts.cancel_payout("disb-nope"), "404", "DATA_NOT_FOUND"),
    ]
    for fault, status, code in (("5xx", "503", "SERVER_ERROR"), ("429", "429", "RATE_LIMIT_EXCEEDED"),
                                ("400", "400", "INVALID_DESTINATION")):
        cases.append((lambda fault=fault: (emulator.fail_next("payouts", fault),
                                           payouts.create_payout("K-" + fault,
                                                                 create_payout_request=a_payout_request("PO"))),
                      status, code))
        cases.append((lambda fault=fault: (emulator.fail_next("invoices", fault),
                                           invoices.create_invoice(create_invoice_request=an_invoice_request("C"))),
                      status, code))
    for call, status, code in cases:
        error = sdk_error(call)
        assert (error.status, error.errorCode) == (status, code) and error.errorMessage, (status, code)
    # A paid invoice cannot be expired: the SDK's spec answers expire! with 200 or 404 only (no PENDING invoice of
    # that id); expiring an expired one again answers it as it is.
    paid = invoices.create_invoice(create_invoice_request=an_invoice_request("C-9"))
    emulator.pay_invoice(paid.id)
    assert sdk_error(lambda: invoices.expire_invoice(paid.id)).errorCode == "INVOICE_NOT_FOUND_ERROR"
    assert not emulator.payouts and assert_sdk_reads_every_answer(emulator) == len(cases) + 2


def test_an_answer_the_sdk_refuses_fails_the_check(emulator):
    # The check is real: an answer of the shape the SDK's models do not read is refused.
    _, payouts = sdk_apis(emulator)
    payouts.create_payout("K", create_payout_request=a_payout_request("PO"))
    [(method, path, status, body)] = emulator.answers
    emulator.answers[0] = (method, path, status, {**body, "failure_code": None})  # what it used to say
    with pytest.raises(AssertionError, match="cannot read"):
        assert_sdk_reads_every_answer(emulator)
    old_invoice = {"id": "i1", "external_id": "C", "user_id": "u", "status": "PENDING", "merchant_name": "E",
                   "amount": 1.0, "currency": "PHP", "invoice_url": "http://x", "expiry_date": "2026-01-01T00:00:00Z",
                   "created": "2026-01-01T00:00:00Z", "updated": "2026-01-01T00:00:00Z"}
    with pytest.raises(TypeError, match="missing 8 required positional arguments"):
        sdk_read(xendit.ApiClient(), old_invoice, sdk_type("GET", "/v2/invoices/i1", 200))


# --- refunds ------------------------------------------------------------------------------------------------


def a_refund_request(invoice_id: str, reference_id: str, amount: float = 500.0,
                     reason: str = "REQUESTED_BY_CUSTOMER") -> CreateRefund:
    return CreateRefund(invoice_id=invoice_id, reference_id=reference_id, amount=amount, currency="PHP",
                        reason=reason)


def a_paid_invoice(emulator, external_id: str, **paid_by) -> str:
    invoices, _ = sdk_apis(emulator)
    invoice = invoices.create_invoice(create_invoice_request=an_invoice_request(external_id))
    emulator.pay_invoice(invoice.id, **paid_by)
    return invoice.id


def test_the_sdk_creates_reads_and_lists_refunds_and_reads_their_webhooks(emulator):
    refunds = sdk_refunds(emulator)
    invoice_id = a_paid_invoice(emulator, "C-R")
    created = refunds.create_refund(idempotency_key="R-1", create_refund=a_refund_request(invoice_id, "R-1"))
    assert isinstance(created, Refund) and created.status == "PENDING"  # POST /refunds
    assert (created.reference_id, created.amount, created.currency, created.invoice_id, created.channel_code) == (
        "R-1", 500.0, "PHP", invoice_id, "GCASH")
    assert created.failure_code is None and created.reason == "REQUESTED_BY_CUSTOMER"
    # The same key and body: the first refund again; the key with another body, or the same reference_id under
    # another key: 409.
    again = refunds.create_refund(idempotency_key="R-1", create_refund=a_refund_request(invoice_id, "R-1"))
    assert again.id == created.id and len(emulator.refunds) == 1
    refused = sdk_error(lambda: refunds.create_refund(idempotency_key="R-1",
                                                      create_refund=a_refund_request(invoice_id, "R-1", 400.0)))
    assert (refused.status, refused.errorCode) == ("409", "IDEMPOTENCY_ERROR")
    refused = sdk_error(lambda: refunds.create_refund(idempotency_key="R-1b",
                                                      create_refund=a_refund_request(invoice_id, "R-1")))
    assert (refused.status, refused.errorCode) == ("409", "DUPLICATE_ERROR")

    emulator.settle_refund(created.id, "SUCCEEDED")
    assert refunds.get_refund(created.id).status == "SUCCEEDED"  # GET /refunds/{id}
    second = refunds.create_refund(idempotency_key="R-2", create_refund=a_refund_request(invoice_id, "R-2", 700.0,
                                                                                         "CANCELLATION"))
    for failure_code in REFUND_FAILURE_CODES:  # accepted, then failed: what a refund.failed webhook says
        emulator.settle_refund(second.id, "FAILED", failure_code)
        read = refunds.get_refund(second.id)
        assert (read.status, read.failure_code) == ("FAILED", failure_code)
    # What is left unrefunded: 1,500 paid, 500 refunded, the failed 700 given back.
    too_much = sdk_error(lambda: refunds.create_refund(idempotency_key="R-3",
                                                       create_refund=a_refund_request(invoice_id, "R-3", 1000.01)))
    assert (too_much.status, too_much.errorCode) == ("400", "MAXIMUM_REFUND_AMOUNT_REACHED")
    third = refunds.create_refund(idempotency_key="R-4", create_refund=a_refund_request(invoice_id, "R-4", 1000.0))

    listed = refunds.get_all_refunds(invoice_id=invoice_id, limit=2.0)  # GET /refunds?invoice_id=: newest first
    assert isinstance(listed, RefundList) and listed.has_more is True
    assert [r.id for r in listed.data] == [third.id, second.id]
    rest = refunds.get_all_refunds(invoice_id=invoice_id, limit=2.0, after_id=second.id)
    assert ([r.id for r in rest.data], rest.has_more) == ([created.id], False)
    assert refunds.get_all_refunds(invoice_id="nobody").data == []

    for event, refund_id in (("refund.succeeded", created.id), ("refund.failed", second.id)):
        body = {"event": event, "business_id": "b", "created": "2026-01-01T00:00:00.000Z",
                "data": emulator.refunds[refund_id]}
        callback = sdk_read(xendit.ApiClient(), json.loads(json.dumps(body, default=float)), (RefundCallback,))
        assert (callback.event, callback.data.id, callback.data.reference_id) == (
            event, refund_id, emulator.refunds[refund_id]["reference_id"])
    with pytest.raises(ValueError):
        emulator.settle_refund(created.id, "REFUNDED")
    assert assert_sdk_reads_every_answer(emulator) == 18


def test_a_refund_xendit_cannot_take_is_refused_with_its_documented_error(emulator):
    refunds = sdk_refunds(emulator)
    invoices, _ = sdk_apis(emulator)
    qr = a_paid_invoice(emulator, "C-QR", method="QR_CODE", channel="QRPH")
    assert str(invoices.get_invoice_by_id(qr).payment_method) == "QR_CODE"
    unpaid = invoices.create_invoice(create_invoice_request=an_invoice_request("C-U")).id
    cases = [
        (lambda: refunds.create_refund(idempotency_key="Q", create_refund=a_refund_request(qr, "Q")), "400",
         "REFUND_NOT_SUPPORTED"),
        (lambda: refunds.create_refund(idempotency_key="U", create_refund=a_refund_request(unpaid, "U")), "400",
         "INELIGIBLE_TRANSACTION"),
        (lambda: refunds.create_refund(idempotency_key="N", create_refund=a_refund_request("nope", "N")), "404",
         "DATA_NOT_FOUND"),
        (lambda: refunds.get_refund("rfd-nope"), "404", "DATA_NOT_FOUND"),
    ]
    paid = a_paid_invoice(emulator, "C-P")
    for fault, status, code in (("5xx", "503", "CHANNEL_UNAVAILABLE"), ("400", "400", "REFUND_NOT_SUPPORTED")):
        cases.append((lambda fault=fault: (emulator.fail_next("refunds", fault), refunds.create_refund(
            idempotency_key="F-" + fault, create_refund=a_refund_request(paid, "F-" + fault))), status, code))
    for call, status, code in cases:
        error = sdk_error(call)
        assert (error.status, error.errorCode) == (status, code) and error.errorMessage, (status, code)
    # ... and three invoices created, one read
    assert not emulator.refunds and assert_sdk_reads_every_answer(emulator) == len(cases) + 4


# --- the adapter's own calls ------------------------------------------------------------------------------------


def sdk_paths() -> set[tuple[str, str]]:
    return {(method, pattern) for method, pattern, _ in SUCCESS_TYPES}


@pytest.mark.django_db
def test_every_call_our_adapter_makes_is_an_sdk_endpoint_and_its_bodies_pass_the_sdk_request_models(
        xendit_channels, merchant, xendit_emulator, live_server):
    import re

    from django.utils import timezone

    from apps.channels.services import channels_reconcile
    from apps.channels.xendit import XenditPayinAdapter, XenditPayoutAdapter
    from apps.payout.services import payout_submit
    from tests.collection.conftest import create_ok as pay_create_ok
    from tests.payout.conftest import create_ok as payout_create_ok
    from tests.payout.conftest import fund

    # Pay-in: the page opens the invoice (list by external_id, create), a webhook re-reads it, a racing duplicate is
    # expired; payout: create, a webhook re-reads it, a lost answer's resubmission and its lookup by reference_id.
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=150000)
    assert Client().get(f"/pay/{order.pay_token}").status_code == 302
    [invoice] = xendit_emulator.invoice_by_external_id(order.platform_order_no)
    xendit_emulator.pay_invoice(invoice["id"])
    webhook = f"{live_server.url}/channels/xendit/{xendit_channels['payin'].code}/webhook"
    assert xendit_emulator.invoice_webhook(invoice["id"], webhook).json()["changed"] == "paid"
    # Refund: create, its lookup among the invoice's refunds, a webhook re-reads it.
    from apps.collection.refunds import refund_create, refund_submit

    refund = refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-1",
                           amount=10_000, reason="requested by customer")
    reference = refund_submit(refund_id=refund.pk)
    XenditPayinAdapter().refund_state(refund=refund)
    xendit_emulator.settle_refund(reference, "SUCCEEDED")
    assert xendit_emulator.refund_webhook("refund.succeeded", reference, webhook).json()["refund"] == "SUCCESS"
    fund(merchant, 10_000_000)
    payout = payout_create_ok(Client(), merchant, amount=150000, bank_code="MBTC", payee_account="0012345678901")
    payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    xendit_emulator.settle_payout(payout.upstream_reference, "SUCCEEDED")
    webhook = f"{live_server.url}/channels/xendit/{xendit_channels['payout'].code}/webhook"
    assert xendit_emulator.payout_webhook("payout.succeeded", payout.upstream_reference, webhook).json()["changed"]
    other = payout_create_ok(Client(), merchant, amount=20000, bank_code="SECB", payee_account="0000111122223")
    xendit_emulator.reused_key = "409"
    xendit_emulator.fail_next("payouts", "timeout")
    with pytest.raises(UpstreamUnavailable):
        payout_submit(payout_id=other.pk)
    from apps.payout.models import Payout

    Payout.objects.filter(pk=other.pk).update(submitted_at=timezone.now() - timedelta(minutes=5))
    payout_submit(payout_id=other.pk)  # 409, then GET /v2/payouts?reference_id=
    channels_reconcile()
    XenditPayoutAdapter.configuration_check(channel=xendit_channels["payout"])  # GET /payouts_channels
    invoice_id = xendit_emulator._invoice_create({"external_id": "X", "amount": 1, "currency": "PHP"})[1]["id"]
    from apps.channels.xendit import XenditClient

    XenditClient(xendit_channels["payin"]).call("POST", f"/invoices/{invoice_id}/expire!")

    made = {(method, re.sub(r"\?.*", "", path)) for method, path, _, _ in xendit_emulator.requests}
    unknown = {(m, p) for m, p in made
               if not any(m == method and re.fullmatch(pattern, p) for method, pattern in sdk_paths())}
    assert not unknown, f"calls the SDK does not make: {unknown}"
    templates = {(m, re.sub(r"/((disb-)?[0-9a-f]{24}|rfd-[0-9a-f-]{36})", "/{id}", p)) for m, p in made}
    assert templates == {("GET", "/v2/invoices"), ("POST", "/v2/invoices"), ("GET", "/v2/invoices/{id}"),
                         ("POST", "/invoices/{id}/expire!"), ("POST", "/v2/payouts"), ("GET", "/v2/payouts"),
                         ("GET", "/v2/payouts/{id}"), ("GET", "/payouts_channels"), ("POST", "/refunds"),
                         ("GET", "/refunds"), ("GET", "/refunds/{id}")}  # every call the adapter makes
    # What the adapter sent is what the SDK's request models accept (exact decimals arrive as JSON numbers).
    for method, path, _, raw in xendit_emulator.requests:
        if method == "POST" and path.rstrip("/") == "/v2/invoices":
            body = json.loads(raw)
            CreateInvoiceRequest(**{**body, "invoice_duration": float(body["invoice_duration"]),
                                    "amount": float(body["amount"])})
        if method == "POST" and path == "/refunds":
            body = json.loads(raw)
            assert CreateRefund(**{**body, "amount": float(body["amount"])}).reason == "REQUESTED_BY_CUSTOMER"
        if method == "POST" and path == "/v2/payouts":
            body = json.loads(raw, parse_float=Decimal)
            CreatePayoutRequest(**{**body, "amount": float(body["amount"]),
                                   "channel_properties": DigitalPayoutChannelProperties(**body["channel_properties"])})
    assert assert_sdk_reads_every_answer(xendit_emulator) == len(xendit_emulator.answers) > 0
