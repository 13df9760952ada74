"""Xendit's webhooks sent by the emulator over real HTTP to our endpoint on the live server: token checked in
constant time, the object re-read from the API, duplicates / out-of-order / late / forged webhooks harmless."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from apps.collection.models import CollectionOrder
from apps.ledger.models import Posting
from apps.payout.models import Payout
from apps.payout.services import payout_submit
from tests.channels.conftest import PAYIN_CODE, PAYOUT_CODE
from tests.collection.conftest import balances as collection_balances
from tests.collection.conftest import create_ok as pay_create_ok
from tests.payout.conftest import PHP_FEE, balances, fund
from tests.payout.conftest import create_ok as payout_create_ok

pytestmark = pytest.mark.django_db(transaction=True)

FUNDS = 10_000_000
AMOUNT = 150000


def url(live_server, code: str) -> str:
    return f"{live_server.url}/channels/xendit/{code}/webhook"


def opened_invoice(merchant, emulator, **params) -> tuple[CollectionOrder, dict]:
    order = pay_create_ok(Client(), merchant, **{"product_code": "PHP_COLLECT_D0", "amount": AMOUNT, **params})
    assert Client().get(f"/pay/{order.pay_token}").status_code == 302
    [invoice] = emulator.invoice_by_external_id(order.platform_order_no)
    return order, invoice


def submitted_payout(merchant, emulator) -> tuple[Payout, str]:
    fund(merchant, FUNDS)
    payout = payout_create_ok(Client(), merchant, amount=AMOUNT, bank_code="GCASH", payee_account="09171234567")
    payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    return payout, payout.upstream_reference


def snapshot(merchant) -> tuple:
    return balances(merchant), Posting.objects.count()


# --- pay-in -------------------------------------------------------------------------------------------------


def test_invoice_paid_webhook_credits_once_and_duplicates_change_nothing(xendit_channels, merchant, xendit_emulator,
                                                                        live_server):
    order, invoice = opened_invoice(merchant, xendit_emulator)
    fee = order.fee
    # The webhook's body says PAID, Xendit's API does not (yet): the body is not believed.
    lie = {**invoice, "status": "PAID"}
    reply = xendit_emulator.invoice_webhook(invoice["id"], url(live_server, PAYIN_CODE), body=lie)
    assert reply.status_code == 200 and reply.json()["changed"] is None
    order.refresh_from_db()
    assert order.status == "CREATED"

    xendit_emulator.pay_invoice(invoice["id"])
    reply = xendit_emulator.invoice_webhook(invoice["id"], url(live_server, PAYIN_CODE))
    assert (reply.status_code, reply.json()["changed"]) == (200, "paid")
    order.refresh_from_db()
    assert (order.status, order.upstream_reference) == ("SUCCESS", invoice["id"])
    after = (collection_balances(merchant), Posting.objects.count())
    assert after[0]["available"] == AMOUNT - fee
    for _ in range(2):  # Xendit retries: nothing moves twice
        reply = xendit_emulator.invoice_webhook(invoice["id"], url(live_server, PAYIN_CODE))
        assert (reply.status_code, reply.json()["changed"]) == (200, None)
    assert (collection_balances(merchant), Posting.objects.count()) == after


def test_forged_invoice_webhook_is_refused_and_changes_nothing(xendit_channels, merchant, xendit_emulator,
                                                               live_server):
    order, invoice = opened_invoice(merchant, xendit_emulator)
    xendit_emulator.pay_invoice(invoice["id"])
    gets_before = sum(1 for m, p, *_ in xendit_emulator.requests if m == "GET")
    for token in ("forged-token", "", xendit_emulator.callback_token + "x"):
        reply = xendit_emulator.invoice_webhook(invoice["id"], url(live_server, PAYIN_CODE), token=token)
        assert reply.status_code == 403
    # refused before anything was read upstream, and nothing moved
    assert sum(1 for m, p, *_ in xendit_emulator.requests if m == "GET") == gets_before
    order.refresh_from_db()
    assert order.status == "CREATED" and not Posting.objects.filter(cause=order.platform_order_no).exists()
    # an unknown channel in the path is no way round it
    assert xendit_emulator.invoice_webhook(invoice["id"], url(live_server, "NOPE")).status_code == 404


def test_invoice_expired_webhook_expires_the_order(xendit_channels, merchant, xendit_emulator, live_server):
    order, invoice = opened_invoice(merchant, xendit_emulator, expire_seconds=60)
    CollectionOrder.objects.filter(pk=order.pk).update(expire_at=timezone.now() - timedelta(seconds=1))
    xendit_emulator.expire_invoice(invoice["id"])
    reply = xendit_emulator.invoice_webhook(invoice["id"], url(live_server, PAYIN_CODE))
    assert (reply.status_code, reply.json()["changed"]) == (200, "expired")
    order.refresh_from_db()
    assert order.status == "EXPIRED" and not Posting.objects.filter(cause=order.platform_order_no).exists()


def test_an_invoice_whose_create_answer_was_lost_is_found_again_not_opened_twice(xendit_channels, merchant,
                                                                                 xendit_emulator, live_server):
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=AMOUNT)
    xendit_emulator.fail_next("invoices", "timeout")  # created upstream, the answer lost
    assert Client().get(f"/pay/{order.pay_token}").status_code == 503
    again = Client().get(f"/pay/{order.pay_token}")
    # The Invoice API takes no idempotency key: the adapter looks the external_id up before creating another one.
    [invoice] = xendit_emulator.invoice_by_external_id(order.platform_order_no)
    assert (again.status_code, again["Location"]) == (302, invoice["invoice_url"])
    xendit_emulator.pay_invoice(invoice["id"])
    assert xendit_emulator.invoice_webhook(invoice["id"], url(live_server, PAYIN_CODE)).json()["changed"] == "paid"
    order.refresh_from_db()
    assert (order.status, order.upstream_reference) == ("SUCCESS", invoice["id"])


def test_a_second_paid_invoice_of_a_paid_order_credits_nothing_and_is_logged_for_refund(
        xendit_channels, merchant, xendit_emulator, live_server, caplog):
    order, invoice = opened_invoice(merchant, xendit_emulator)
    xendit_emulator.pay_invoice(invoice["id"])
    assert xendit_emulator.invoice_webhook(invoice["id"], url(live_server, PAYIN_CODE)).json()["changed"] == "paid"
    after = (collection_balances(merchant), Posting.objects.count())
    # Two racing first openings both created an invoice; the payer somehow pays the other one too.
    other = xendit_emulator._invoice_create({"external_id": order.platform_order_no, "amount": invoice["amount"],
                                             "currency": "PHP"})[1]
    xendit_emulator.pay_invoice(other["id"])
    with caplog.at_level("ERROR", logger="apps.collection.upstream"):
        reply = xendit_emulator.invoice_webhook(other["id"], url(live_server, PAYIN_CODE))
    assert (reply.status_code, reply.json()["changed"]) == (200, None)
    assert (collection_balances(merchant), Posting.objects.count()) == after
    assert Posting.objects.filter(cause=order.platform_order_no, kind="collection.success").count() == 1
    [record] = [r for r in caplog.records if "paid twice upstream" in r.getMessage()]
    assert other["id"] in record.getMessage() and "refund" in record.getMessage()


# --- payout -------------------------------------------------------------------------------------------------


def test_payout_succeeded_webhook_pays_once(xendit_channels, merchant, xendit_emulator, live_server):
    payout, upstream_id = submitted_payout(merchant, xendit_emulator)
    # the body says succeeded, Xendit's API says ACCEPTED: not believed
    reply = xendit_emulator.payout_webhook("payout.succeeded", upstream_id, url(live_server, PAYOUT_CODE),
                                           data={**xendit_emulator.payouts[upstream_id], "status": "SUCCEEDED"})
    assert (reply.status_code, reply.json()["changed"]) == (200, None)
    xendit_emulator.settle_payout(upstream_id, "SUCCEEDED")
    for expected in ("succeeded", None, None):
        reply = xendit_emulator.payout_webhook("payout.succeeded", upstream_id, url(live_server, PAYOUT_CODE))
        assert (reply.status_code, reply.json()["changed"]) == (200, expected)
    payout.refresh_from_db()
    assert payout.status == "SUCCESS" and payout.reversed_at is None
    assert balances(merchant) == {"available": FUNDS - AMOUNT - PHP_FEE, "settling": 0, "frozen": 0}


def test_payout_failed_webhook_fails_it_and_the_funds_come_back(xendit_channels, merchant, xendit_emulator,
                                                                live_server):
    payout, upstream_id = submitted_payout(merchant, xendit_emulator)
    xendit_emulator.settle_payout(upstream_id, "FAILED", failure_code="INVALID_DESTINATION")
    reply = xendit_emulator.payout_webhook("payout.failed", upstream_id, url(live_server, PAYOUT_CODE))
    assert (reply.status_code, reply.json()["changed"]) == (200, "failed")
    payout.refresh_from_db()
    assert (payout.status, payout.fail_reason) == ("FAILED", "INVALID_DESTINATION")
    assert balances(merchant) == {"available": FUNDS, "settling": 0, "frozen": 0}
    # a late success notice for a failed payout (Xendit's API still says FAILED): nothing moves
    before = snapshot(merchant)
    assert xendit_emulator.payout_webhook("payout.succeeded", upstream_id,
                                          url(live_server, PAYOUT_CODE)).json()["changed"] is None
    assert snapshot(merchant) == before


def test_payout_reversed_after_success_is_reversed_once_with_the_fee(xendit_channels, merchant, xendit_emulator,
                                                                    live_server):
    payout, upstream_id = submitted_payout(merchant, xendit_emulator)
    xendit_emulator.settle_payout(upstream_id, "SUCCEEDED")
    assert xendit_emulator.payout_webhook("payout.succeeded", upstream_id,
                                          url(live_server, PAYOUT_CODE)).json()["changed"] == "succeeded"
    xendit_emulator.settle_payout(upstream_id, "REVERSED")
    changes = [xendit_emulator.payout_webhook("payout.reversed", upstream_id, url(live_server, PAYOUT_CODE)).json()
               ["changed"] for _ in range(2)]
    assert changes == ["reversed", None]
    payout.refresh_from_db()
    assert (payout.status, payout.reversal_amount, payout.fee_refund) == ("SUCCESS", AMOUNT, PHP_FEE)
    assert balances(merchant) == {"available": FUNDS, "settling": 0, "frozen": 0}


def test_out_of_order_reversal_before_success_applies_both_once(xendit_channels, merchant, xendit_emulator,
                                                                live_server):
    payout, upstream_id = submitted_payout(merchant, xendit_emulator)
    xendit_emulator.settle_payout(upstream_id, "REVERSED")  # succeeded, then reversed; the first webhook is late
    assert xendit_emulator.payout_webhook("payout.reversed", upstream_id,
                                          url(live_server, PAYOUT_CODE)).json()["changed"] == "reversed"
    before = snapshot(merchant)
    assert xendit_emulator.payout_webhook("payout.succeeded", upstream_id,
                                          url(live_server, PAYOUT_CODE)).json()["changed"] is None
    assert snapshot(merchant) == before == ({"available": FUNDS, "settling": 0, "frozen": 0}, before[1])
    payout.refresh_from_db()
    assert payout.status == "SUCCESS" and payout.reversed_at is not None


def test_forged_payout_webhook_is_refused_and_changes_nothing(xendit_channels, merchant, xendit_emulator,
                                                              live_server):
    payout, upstream_id = submitted_payout(merchant, xendit_emulator)
    xendit_emulator.settle_payout(upstream_id, "SUCCEEDED")
    before = snapshot(merchant)
    for token in ("forged", ""):
        reply = xendit_emulator.payout_webhook("payout.succeeded", upstream_id, url(live_server, PAYOUT_CODE),
                                               token=token)
        assert reply.status_code == 403
    # the pay-in channel's URL with the payout channel's token is no way round it either (its own token differs)
    from apps.channels.services import channel_credentials_set

    channel_credentials_set(channel=xendit_channels["payin"], callback_token="another-token")
    assert xendit_emulator.payout_webhook("payout.succeeded", upstream_id,
                                          url(live_server, PAYIN_CODE)).status_code == 403
    payout.refresh_from_db()
    assert payout.status == "PROCESSING" and snapshot(merchant) == before


def test_webhook_for_an_object_that_is_not_ours_is_acknowledged_and_ignored(xendit_channels, merchant,
                                                                           xendit_emulator, live_server):
    # another system on the same Xendit account: an invoice and a payout with foreign references
    invoice = xendit_emulator._invoice_create({"external_id": "SOMEONE-ELSE-1", "amount": 100, "currency": "PHP"})[1]
    xendit_emulator.pay_invoice(invoice["id"])
    reply = xendit_emulator.invoice_webhook(invoice["id"], url(live_server, PAYIN_CODE))
    assert (reply.status_code, reply.json()["changed"]) == (200, None)
    status, foreign = xendit_emulator._payout_create(
        {"reference_id": "SOMEONE-ELSE-2", "channel_code": "PH_BDO", "amount": 100, "currency": "PHP",
         "channel_properties": {"account_number": "1", "account_holder_name": "X"}}, {"Idempotency-key": "k"})
    xendit_emulator.settle_payout(foreign["id"], "SUCCEEDED")
    reply = xendit_emulator.payout_webhook("payout.succeeded", foreign["id"], url(live_server, PAYOUT_CODE))
    assert (reply.status_code, reply.json()["changed"]) == (200, None)
    assert not Posting.objects.filter(cause__startswith="SOMEONE-ELSE").exists()


def test_webhook_while_xendit_api_cannot_be_asked_is_503_and_moves_nothing(xendit_channels, merchant,
                                                                          xendit_emulator, live_server):
    payout, upstream_id = submitted_payout(merchant, xendit_emulator)
    xendit_emulator.settle_payout(upstream_id, "SUCCEEDED")
    before = snapshot(merchant)
    xendit_emulator.stop()  # its API is gone; the webhook still arrives (Xendit retries a 5xx later)
    reply = xendit_emulator.payout_webhook("payout.succeeded", upstream_id, url(live_server, PAYOUT_CODE))
    assert reply.status_code == 503
    payout.refresh_from_db()
    assert payout.status == "PROCESSING" and snapshot(merchant) == before


def test_another_disbursement_with_our_order_number_moves_nothing(xendit_channels, merchant, xendit_emulator,
                                                                  live_server, caplog):
    # Xendit's reference_id need not be unique: someone else's payout on the account carries our order number.
    payout, upstream_id = submitted_payout(merchant, xendit_emulator)
    before = snapshot(merchant)
    for amount in (AMOUNT // 100, 1):  # same amount but another payout; another amount
        foreign = xendit_emulator._payout_create(
            {"reference_id": payout.platform_order_no, "channel_code": "PH_BDO", "amount": amount, "currency": "PHP",
             "channel_properties": {"account_number": "1", "account_holder_name": "X"}},
            {"Idempotency-key": f"other-{amount}"})[1]
        xendit_emulator.settle_payout(foreign["id"], "SUCCEEDED")
        with caplog.at_level("ERROR", logger="apps.payout.upstream"):
            reply = xendit_emulator.payout_webhook("payout.succeeded", foreign["id"], url(live_server, PAYOUT_CODE))
        assert (reply.status_code, reply.json()["changed"]) == (200, None)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", upstream_id) and snapshot(merchant) == before
    assert len([r for r in caplog.records if "nothing applied" in r.getMessage()]) == 2
    # ... and a payout whose create answer was lost is not matched to a foreign one of another amount
    Payout.objects.filter(pk=payout.pk).update(upstream_reference="")
    xendit_emulator.payouts.pop(upstream_id)
    foreign = xendit_emulator._payout_create(
        {"reference_id": payout.platform_order_no, "channel_code": "PH_BDO", "amount": 7, "currency": "PHP",
         "channel_properties": {"account_number": "1", "account_holder_name": "X"}}, {"Idempotency-key": "other-7"})[1]
    xendit_emulator.settle_payout(foreign["id"], "SUCCEEDED")
    assert xendit_emulator.payout_webhook("payout.succeeded", foreign["id"],
                                          url(live_server, PAYOUT_CODE)).json()["changed"] is None
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", "")


def test_webhook_for_an_object_we_cannot_read_is_acknowledged_not_retried_for_a_day(xendit_channels, merchant,
                                                                                  xendit_emulator, live_server):
    # Another system's payout in a currency we do not have, and an invoice of a fraction of a centavo: Xendit would
    # retry a non-200 for 24 hours; they are acknowledged, logged, and move nothing.
    status, thb = xendit_emulator._payout_create(
        {"reference_id": "SOMEONE-ELSE-3", "channel_code": "TH_BBL", "amount": 100, "currency": "THB",
         "channel_properties": {"account_number": "1", "account_holder_name": "X"}}, {"Idempotency-key": "thb"})
    xendit_emulator.settle_payout(thb["id"], "SUCCEEDED")
    reply = xendit_emulator.payout_webhook("payout.succeeded", thb["id"], url(live_server, PAYOUT_CODE))
    assert (reply.status_code, reply.json()["changed"]) == (200, None)
    odd = xendit_emulator._invoice_create({"external_id": "SOMEONE-ELSE-4", "amount": Decimal("0.001"),
                                           "currency": "PHP"})[1]
    xendit_emulator.pay_invoice(odd["id"])
    reply = xendit_emulator.invoice_webhook(odd["id"], url(live_server, PAYIN_CODE))
    assert (reply.status_code, reply.json()["changed"]) == (200, None)
    assert not Posting.objects.filter(cause__startswith="SOMEONE-ELSE").exists()


def test_two_racing_first_openings_leave_one_payable_invoice(xendit_channels, merchant, xendit_emulator):
    from django.db import connection

    from apps.channels.models import UpstreamPayin

    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=AMOUNT)
    competitor = {}

    def the_other_opening_records_its_invoice_first(invoice):
        # Both openings looked the external_id up before either created; the other one recorded its invoice first.
        xendit_emulator.on_invoice_created = None
        competitor.update(xendit_emulator._invoice_create(
            {"external_id": order.platform_order_no, "amount": invoice["amount"], "currency": "PHP"})[1])
        UpstreamPayin.objects.create(channel=xendit_channels["payin"], platform_order_no=order.platform_order_no,
                                     reference=competitor["id"], redirect_url=competitor["invoice_url"])
        connection.close()  # this server thread's own connection

    xendit_emulator.on_invoice_created = the_other_opening_records_its_invoice_first
    page = Client().get(f"/pay/{order.pay_token}")
    assert (page.status_code, page["Location"]) == (302, competitor["invoice_url"])
    invoices = {i["id"]: i["status"] for i in xendit_emulator.invoice_by_external_id(order.platform_order_no)}
    assert len(invoices) == 2 and invoices.pop(competitor["id"]) == "PENDING"
    assert list(invoices.values()) == ["EXPIRED"]  # the loser's own invoice: no one can pay the order twice
