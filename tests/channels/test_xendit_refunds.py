"""Refunds through Xendit (docs/channels.md, "Xendit refunds"; docs/api.md, "Refunds") against the emulator over real
HTTP: the Refund API's create by reference_id and Idempotency-key, its lookup among the invoice's refunds, the refund
webhooks re-read from the API, Xendit's refund rules at create, a lost answer and a lost webhook found by the sweep,
and a submission racing the sweep."""

import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from apps.callbacks.models import CallbackEvent
from apps.channels.base import LookupUnknown
from apps.channels.models import RefundRule, UpstreamPayin
from apps.channels.xendit import XenditPayinAdapter, refund_reason
from apps.collection.models import CollectionOrder, Refund
from apps.collection.refunds import refund_submit, refunds_sweep
from apps.ledger.models import Posting
from apps.ledger.selectors import ledger_verify
from tests.callbacks.merchant_side import merchant_verifies
from tests.channels.conftest import (
    PAYIN_CODE,
    refund_amount_mismatches,
    refunds_stuck_a_minute_later,
)
from tests.collection.conftest import balances
from tests.collection.conftest import create_ok as pay_create_ok
from tests.conftest import make_merchant
from tests.helpers import assert_error, assert_ok, at_once, signed_post
from tests.support.wait import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

AMOUNT = 150_000  # ₱1,500.00
CREATE = "/openapi/v1/refund/create"


def webhook_url(live_server) -> str:
    return f"{live_server.url}/channels/xendit/{PAYIN_CODE}/webhook"


def paid_order(merchant, emulator, live_server, *, method: str = "EWALLET", channel: str = "GCASH",
               amount: int = AMOUNT) -> tuple[CollectionOrder, str]:
    """An order paid through a Xendit invoice (the payer by `channel`), learnt from the invoice webhook."""
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=amount)
    assert Client().get(f"/pay/{order.pay_token}").status_code == 302
    # The one recorded for the order (with a worker running, its opening after pay/create may race the page's).
    shown = UpstreamPayin.objects.get(platform_order_no=order.platform_order_no).reference
    [invoice] = [i for i in emulator.invoice_by_external_id(order.platform_order_no) if i["id"] == shown]
    emulator.pay_invoice(invoice["id"], method=method, channel=channel)
    assert emulator.invoice_webhook(invoice["id"], webhook_url(live_server)).json()["changed"] == "paid"
    order.refresh_from_db()
    return order, invoice["id"]


def refund_create(merchant, order, mch_refund_no: str, amount: int, **extra) -> tuple[int, dict]:
    return signed_post(Client(), merchant, CREATE, {"mch_order_no": order.mch_order_no,
                                                    "mch_refund_no": mch_refund_no, "amount": amount, **extra})


def refund_posts(emulator) -> list:
    return [r for r in emulator.requests if r[0] == "POST" and r[1] == "/refunds"]


def state(merchant) -> tuple:
    return balances(merchant), Posting.objects.count(), Refund.objects.count()


def swept_later() -> dict:
    """The refund sweep as its periodic run sees refunds made a minute ago (past its grace)."""
    return refunds_sweep(now=timezone.now() + timedelta(minutes=1))


# --- the adapter -------------------------------------------------------------------------------------------------


def test_the_invoice_records_how_the_payer_paid(xendit_channels, merchant, xendit_emulator, live_server):
    order, _ = paid_order(merchant, xendit_emulator, live_server, method="QR_CODE", channel="QRPH")
    assert UpstreamPayin.objects.get(platform_order_no=order.platform_order_no).payment_method == "QRPH"


def test_the_merchants_reason_is_sent_in_xendits_words():
    assert [refund_reason(r) for r in ("", "duplicate", "Requested by customer", "fraudulent", "too big")] == [
        "REQUESTED_BY_CUSTOMER", "DUPLICATE", "REQUESTED_BY_CUSTOMER", "FRAUDULENT", "OTHERS"]


def test_a_refund_is_created_at_xendit_once_under_its_refund_no(xendit_channels, merchant, xendit_emulator,
                                                                live_server):
    order, invoice_id = paid_order(merchant, xendit_emulator, live_server)
    data = assert_ok(refund_create(merchant, order, "RF-1", 30_001, reason="duplicate"))
    refund = Refund.objects.get(refund_no=data["refund_no"])
    reference = refund_submit(refund_id=refund.pk)
    [upstream] = xendit_emulator.refunds_by_reference(refund.refund_no)
    assert (upstream["id"], upstream["invoice_id"], upstream["amount"], upstream["currency"], upstream["reason"],
            upstream["status"]) == (reference, invoice_id, Decimal("300.01"), "PHP", "DUPLICATE", "PENDING")
    assert xendit_emulator.refund_keys == {refund.refund_no: reference}
    # Submitted again (a redelivered task, the sweep): nothing more goes upstream.
    assert refund_submit(refund_id=refund.pk) is None
    adapter = XenditPayinAdapter()
    assert adapter.start_refund(refund=refund) == reference  # the same key and body: the same refund
    assert len(xendit_emulator.refunds) == 1
    assert adapter.refund_state(refund=refund).outcome == "pending"


def test_a_refund_xendit_refuses_fails_and_its_amount_comes_back(xendit_channels, merchant, xendit_emulator,
                                                                 live_server):
    order, _ = paid_order(merchant, xendit_emulator, live_server)
    before = balances(merchant)
    data = assert_ok(refund_create(merchant, order, "RF-1", 30_000))
    xendit_emulator.fail_next("refunds", "400")
    assert refund_submit(refund_id=Refund.objects.get(refund_no=data["refund_no"]).pk) is None
    refund = Refund.objects.get(refund_no=data["refund_no"])
    assert (refund.status, refund.fail_reason) == ("FAILED", "refused upstream: REFUND_NOT_SUPPORTED")
    assert balances(merchant) == before and not xendit_emulator.refunds


def test_a_list_not_read_to_its_end_is_unknown_and_nothing_is_sent_again(xendit_channels, merchant, xendit_emulator,
                                                                        live_server):
    order, invoice_id = paid_order(merchant, xendit_emulator, live_server)
    refund = Refund.objects.get(refund_no=assert_ok(refund_create(merchant, order, "RF-1", 10_000))["refund_no"])
    xendit_emulator.page_limit = 1
    for number in range(2):  # refunds the dashboard made on the same invoice, newer than none of ours
        status, _ = xendit_emulator._refund_create({"invoice_id": invoice_id, "reference_id": f"DASH-{number}",
                                                    "amount": 10, "currency": "PHP", "reason": "OTHERS"}, {})
        assert status == 200
    xendit_emulator.fail_next_page("5xx")
    with pytest.raises(LookupUnknown):
        XenditPayinAdapter().refund_state(refund=refund)
    xendit_emulator.fail_next_page("5xx")
    assert swept_later() == {}  # unknown: the refund waits, nothing is sent blind
    assert not refund_posts(xendit_emulator)
    refund.refresh_from_db()
    assert (refund.status, refund.upstream_reference) == ("PROCESSING", "")
    # Read whole (two pages of one), none is ours: sent now, once.
    assert swept_later() == {"refund.unsubmitted": 1}
    assert len(xendit_emulator.refunds_by_reference(refund.refund_no)) == 1


# --- rules at create -----------------------------------------------------------------------------------------------


def test_a_qr_ph_payment_is_refused_at_create_with_2007_naming_the_rule_and_nothing_moves(
        xendit_channels, merchant, xendit_emulator, live_server):
    order, _ = paid_order(merchant, xendit_emulator, live_server, method="QR_CODE", channel="QRPH")
    before = state(merchant)
    body = assert_error(refund_create(merchant, order, "RF-QR", 10_000), "2007", 422)
    assert body["msg"] == (f"order {order.mch_order_no} cannot be refunded: channel {PAYIN_CODE} takes no refunds of "
                           f"QRPH payments.")
    assert state(merchant) == before
    assert not refund_posts(xendit_emulator)


def test_refund_rule_rows_override_xendits_defaults(xendit_channels, merchant, xendit_emulator, live_server):
    channel = xendit_channels["payin"]
    gcash, _ = paid_order(merchant, xendit_emulator, live_server)
    # GCash only once and in full on this channel: a part is refused, the whole is taken.
    RefundRule.objects.create(channel=channel, method="GCASH", partial=False)
    before = state(merchant)
    body = assert_error(refund_create(merchant, gcash, "RF-PART", 10_000), "2007", 422)
    assert f"channel {PAYIN_CODE} refunds GCASH payments only once, in full ({AMOUNT})" in body["msg"]
    assert state(merchant) == before
    paid_order(merchant, xendit_emulator, live_server)  # enough available for a refund of the whole
    whole = assert_ok(refund_create(merchant, gcash, "RF-ALL", AMOUNT))
    assert (whole["status"], whole["refundable"]) == ("PROCESSING", 0)
    # QR Ph allowed by a row of the channel's own: taken at create; Xendit itself then refuses it, so the refund
    # fails and its amount comes back.
    RefundRule.objects.create(channel=channel, method="QRPH", refundable=True)
    qr, _ = paid_order(merchant, xendit_emulator, live_server, method="QR_CODE", channel="QRPH")
    before = balances(merchant)
    refund = Refund.objects.get(refund_no=assert_ok(refund_create(merchant, qr, "RF-QR", 10_000))["refund_no"])
    refund_submit(refund_id=refund.pk)
    refund.refresh_from_db()
    assert (refund.status, refund.fail_reason) == ("FAILED", "refused upstream: REFUND_NOT_SUPPORTED")
    assert balances(merchant) == before


def test_a_card_payment_is_refundable_within_xendits_window_only(xendit_channels, merchant, xendit_emulator,
                                                                 live_server):
    order, _ = paid_order(merchant, xendit_emulator, live_server, method="CREDIT_CARD", channel="CREDIT_CARD")
    CollectionOrder.objects.filter(pk=order.pk).update(paid_at=timezone.now() - timedelta(days=181))
    before = state(merchant)
    body = assert_error(refund_create(merchant, order, "RF-LATE", 10_000), "2007", 422)
    assert body["msg"].endswith(f"channel {PAYIN_CODE} refunds CREDIT_CARD payments only within 180 days of payment.")
    assert state(merchant) == before
    CollectionOrder.objects.filter(pk=order.pk).update(paid_at=timezone.now() - timedelta(days=179))
    assert assert_ok(refund_create(merchant, order, "RF-LATE", 10_000))["status"] == "PROCESSING"


# --- webhooks ------------------------------------------------------------------------------------------------------


def test_a_refund_accepted_then_failed_ends_failed_with_its_hold_released(xendit_channels, merchant,
                                                                         xendit_emulator, live_server):
    order, _ = paid_order(merchant, xendit_emulator, live_server)
    before = balances(merchant)
    refund = Refund.objects.get(refund_no=assert_ok(refund_create(merchant, order, "RF-1", 40_000))["refund_no"])
    reference = refund_submit(refund_id=refund.pk)
    url = webhook_url(live_server)
    # A forged webhook and one whose body lies (the API still says PENDING) change nothing.
    forged = xendit_emulator.refund_webhook("refund.failed", reference, url, token="not-the-token")
    assert forged.status_code == 403
    lie = {**xendit_emulator.refunds[reference], "status": "FAILED", "failure_code": "REFUND_FAILED"}
    assert xendit_emulator.refund_webhook("refund.failed", reference, url, data=lie).json()["refund"] is None
    refund.refresh_from_db()
    assert refund.status == "PROCESSING"
    assert balances(merchant)["frozen"] == 40_000

    xendit_emulator.settle_refund(reference, "FAILED", "INSUFFICIENT_BALANCE")
    for _ in range(2):  # Xendit's retry of the same webhook changes nothing twice
        reply = xendit_emulator.refund_webhook("refund.failed", reference, url)
        assert (reply.status_code, reply.json()["refund"]) == (200, "FAILED")
    refund.refresh_from_db()
    assert (refund.status, refund.fail_reason) == ("FAILED", "INSUFFICIENT_BALANCE")
    assert balances(merchant) == before
    assert ledger_verify()["ok"]


def test_a_refund_webhook_of_someone_elses_refund_is_acknowledged_and_ignored(xendit_channels, merchant,
                                                                             xendit_emulator, live_server):
    _, invoice_id = paid_order(merchant, xendit_emulator, live_server)
    before = state(merchant)
    _, foreign = xendit_emulator._refund_create({"invoice_id": invoice_id, "reference_id": "THEIRS-1", "amount": 5,
                                                 "currency": "PHP", "reason": "OTHERS"}, {})
    xendit_emulator.settle_refund(foreign["id"], "SUCCEEDED")
    reply = xendit_emulator.refund_webhook("refund.succeeded", foreign["id"], webhook_url(live_server))
    assert (reply.status_code, reply.json()["refund"]) == (200, None)
    assert state(merchant) == before


def test_a_refund_webhook_whose_read_back_amount_differs_finishes_nothing_and_is_left_to_an_operator(
        xendit_channels, merchant, xendit_emulator, live_server):
    order, _ = paid_order(merchant, xendit_emulator, live_server)
    refund = Refund.objects.get(refund_no=assert_ok(refund_create(merchant, order, "RF-1", 40_000))["refund_no"])
    reference = refund_submit(refund_id=refund.pk)
    xendit_emulator.settle_refund(reference, "SUCCEEDED")
    with xendit_emulator._lock:  # Xendit's refund of our reference_id gave back ₱300.00, not our ₱400.00
        xendit_emulator.refunds[reference]["amount"] = Decimal("300.00")
    before, mismatches = state(merchant), refund_amount_mismatches("xendit")
    for _ in range(2):  # the webhook and Xendit's retry of it
        reply = xendit_emulator.refund_webhook("refund.succeeded", reference, webhook_url(live_server))
        assert (reply.status_code, reply.json()["refund"]) == (200, "PROCESSING")
    assert refund_amount_mismatches("xendit") == mismatches + 2
    # The sweep's lookup compares too: nothing finishes it; the overview lists it as stuck for an operator.
    assert swept_later() == {}
    refund.refresh_from_db()
    assert (refund.status, state(merchant)) == ("PROCESSING", before)
    assert balances(merchant)["frozen"] == 40_000
    assert not CallbackEvent.objects.filter(platform_order_no=refund.refund_no).exists()
    assert refunds_stuck_a_minute_later() == [refund.refund_no]
    # Once Xendit holds our amount (its correction), the next webhook finishes the refund once.
    with xendit_emulator._lock:
        xendit_emulator.refunds[reference]["amount"] = Decimal("400.00")
    assert xendit_emulator.refund_webhook("refund.succeeded", reference,
                                          webhook_url(live_server)).json()["refund"] == "SUCCESS"
    assert CallbackEvent.objects.filter(platform_order_no=refund.refund_no).count() == 1
    assert ledger_verify()["ok"]


# --- lost answers and lost webhooks ----------------------------------------------------------------------------


def test_a_create_whose_answer_timed_out_is_found_by_the_sweep_and_never_sent_twice(
        xendit_channels, merchant, xendit_emulator, live_server):
    order, _ = paid_order(merchant, xendit_emulator, live_server)
    refund = Refund.objects.get(refund_no=assert_ok(refund_create(merchant, order, "RF-1", 50_000))["refund_no"])
    xendit_emulator.fail_next("refunds", "timeout")  # Xendit takes it; its answer is lost
    assert refund_submit(refund_id=refund.pk) is None
    refund.refresh_from_db()
    assert (refund.status, refund.upstream_reference) == ("PROCESSING", "")
    [upstream] = xendit_emulator.refunds_by_reference(refund.refund_no)

    assert swept_later() == {}  # looked up first: pending at Xendit, its reference recorded, nothing sent
    refund.refresh_from_db()
    assert refund.upstream_reference == upstream["id"]
    assert len(refund_posts(xendit_emulator)) == 1
    assert refund_submit(refund_id=refund.pk) is None  # the reference is known: never sent again

    # Xendit refunds it and its webhook is lost: the sweep finds the answer and finishes the refund once.
    xendit_emulator.settle_refund(upstream["id"], "SUCCEEDED")
    assert swept_later() == {"refund.unanswered": 1}
    refund.refresh_from_db()
    assert (refund.status, refund.upstream_reference) == ("SUCCESS", upstream["id"])
    assert balances(merchant) == {"available": AMOUNT - order.fee - 50_000, "settling": 0, "frozen": 0}
    assert swept_later() == {}
    assert len(refund_posts(xendit_emulator)) == 1 and len(xendit_emulator.refunds) == 1
    assert ledger_verify()["ok"]


def test_a_submission_racing_the_sweep_makes_one_refund_upstream(xendit_channels, merchant, xendit_emulator,
                                                                 live_server):
    order, _ = paid_order(merchant, xendit_emulator, live_server)
    refund = Refund.objects.get(refund_no=assert_ok(refund_create(merchant, order, "RF-1", 20_000))["refund_no"])
    xendit_emulator.refund_create_delay = 0.4  # Xendit is slow to answer: the sweep runs while it is on the way

    outcomes = at_once(lambda i: refund_submit(refund_id=refund.pk) if i == 0 else swept_later(), 2)
    assert all(error is None for _, error in outcomes), outcomes
    [upstream] = xendit_emulator.refunds_by_reference(refund.refund_no)
    assert len(refund_posts(xendit_emulator)) == 1
    refund.refresh_from_db()
    assert (refund.status, refund.upstream_reference) == ("PROCESSING", upstream["id"])


# --- end to end ------------------------------------------------------------------------------------------------


def refund_callbacks(receiver, refund_no: str) -> list[dict]:
    return [r.body for r in receiver.requests if r.body and r.body.get("refund_no") == refund_no]


def test_a_payment_refunded_in_parts_through_xendit_calls_the_merchant_back_once_each(
        xendit_channels, bootstrapped, rsa_keys, xendit_emulator, live_server, callback_receiver,
        live_celery_worker):
    shop = make_merchant(rsa_keys[2], name="Refund Shop", collection_callback_url=callback_receiver.url)
    order, invoice_id = paid_order(shop, xendit_emulator, live_server)
    paid_in = AMOUNT - order.fee
    url = webhook_url(live_server)
    parts = (("RF-A", 30_000, "SUCCEEDED"), ("RF-B", 45_000, "FAILED"), ("RF-C", 50_000, "SUCCEEDED"))
    for mch_refund_no, amount, outcome in parts:
        data = assert_ok(refund_create(shop, order, mch_refund_no, amount))
        # The worker submits it to Xendit after commit, through the invoice that took the payment.
        [upstream] = wait_until(lambda: xendit_emulator.refunds_by_reference(data["refund_no"]),
                                what=f"refund {mch_refund_no} at Xendit")
        assert (upstream["invoice_id"], upstream["amount"]) == (invoice_id, Decimal(amount) / 100)
        wait_until(lambda: Refund.objects.get(refund_no=data["refund_no"]).upstream_reference,
                   what="the reference recorded")
        xendit_emulator.settle_refund(upstream["id"], outcome, "REFUND_FAILED" if outcome == "FAILED" else None)
        event = "refund.succeeded" if outcome == "SUCCEEDED" else "refund.failed"
        assert xendit_emulator.refund_webhook(event, upstream["id"], url).status_code == 200
        [callback] = wait_until(lambda: refund_callbacks(callback_receiver, data["refund_no"]),
                                what=f"the callback of {mch_refund_no}")
        assert merchant_verifies(callback)
        assert (callback["mch_refund_no"], callback["amount"], callback["status"]) == (
            mch_refund_no, amount, "SUCCESS" if outcome == "SUCCEEDED" else "FAILED")

    refunded = 30_000 + 50_000
    assert balances(shop) == {"available": paid_in - refunded, "settling": 0, "frozen": 0}
    queried = assert_ok(signed_post(Client(), shop, "/openapi/v1/refund/query", {"mch_refund_no": "RF-C"}))
    assert (queried["status"], queried["refunded_total"], queried["refundable"]) == (
        "SUCCESS", refunded, AMOUNT - refunded)
    # Beyond what is left: 2008, nothing moves, nothing goes to Xendit.
    assert_error(refund_create(shop, order, "RF-D", AMOUNT - refunded + 1), "2008", 422)
    time.sleep(1)  # a second delivery would have come by now
    for mch_refund_no, _, _ in parts:
        [refund] = Refund.objects.filter(mch_refund_no=mch_refund_no)
        assert len(refund_callbacks(callback_receiver, refund.refund_no)) == 1
    assert len(xendit_emulator.refunds) == 3 and len(refund_posts(xendit_emulator)) == 3
    assert ledger_verify()["ok"]


def test_a_refund_goes_to_the_channel_that_took_the_payment_whatever_the_order_names_now(
        xendit_channels, merchant, xendit_emulator, live_server):
    from apps.channels.models import Channel

    order, invoice_id = paid_order(merchant, xendit_emulator, live_server)
    # The order now names another channel (one this live deployment may not even use); its invoice was paid at Xendit.
    sandbox = Channel.objects.filter(adapter="sandbox", direction=Channel.Direction.PAYIN, currency_id="PHP").first()
    CollectionOrder.objects.filter(pk=order.pk).update(channel=sandbox)
    refund = Refund.objects.get(refund_no=assert_ok(refund_create(merchant, order, "RF-1", 10_000))["refund_no"])
    assert refund.channel == xendit_channels["payin"]
    refund_submit(refund_id=refund.pk)
    [upstream] = xendit_emulator.refunds_by_reference(refund.refund_no)
    assert upstream["invoice_id"] == invoice_id


def test_refunds_whose_webhooks_were_lost_are_finished_by_the_beats_sweep_in_the_worker(
        xendit_channels, bootstrapped, rsa_keys, xendit_emulator, live_server, callback_receiver,
        live_celery_worker, monkeypatch):
    from apps.collection import refunds
    from apps.collection.tasks import sweep_stranded_payins

    shop = make_merchant(rsa_keys[2], name="Refund Shop", collection_callback_url=callback_receiver.url)
    order, _ = paid_order(shop, xendit_emulator, live_server)
    made = {}
    for mch_refund_no, amount, outcome in (("RF-OK", 30_000, "SUCCEEDED"), ("RF-KO", 20_000, "FAILED")):
        number = assert_ok(refund_create(shop, order, mch_refund_no, amount))["refund_no"]
        [upstream] = wait_until(lambda: xendit_emulator.refunds_by_reference(number), what="the refund at Xendit")
        xendit_emulator.settle_refund(upstream["id"], outcome)  # and its webhook never arrives
        made[number] = "SUCCESS" if outcome == "SUCCEEDED" else "FAILED"
    wait_until(lambda: all(Refund.objects.get(refund_no=n).upstream_reference for n in made),
               what="both references recorded")
    assert set(Refund.objects.filter(refund_no__in=made).values_list("status", flat=True)) == {"PROCESSING"}

    monkeypatch.setattr(refunds, "REFUND_SWEEP_GRACE", timedelta(0))  # the worker runs in this process
    sweep_stranded_payins.delay()  # what beat sends every 15 s
    for number, status in made.items():
        [callback] = wait_until(lambda: refund_callbacks(callback_receiver, number), what=f"{number} called back")
        assert callback["status"] == status and merchant_verifies(callback)
        assert Refund.objects.get(refund_no=number).status == status
    assert balances(shop) == {"available": AMOUNT - order.fee - 30_000, "settling": 0, "frozen": 0}
    assert len(refund_posts(xendit_emulator)) == 2
    assert ledger_verify()["ok"]
