"""PayMongo's webhooks sent by the emulator over real HTTP to our endpoint on the live server: Paymongo-Signature
checked as documented (t, te/li, HMAC-SHA256 of "t.body" with the webhook's secret key, a timestamp tolerance, the
event's mode against the channel's), then the object re-read from the API before money moves; duplicates, replays,
forged and foreign webhooks harmless."""

import time

import pytest
from django.test import Client

from apps.channels.paymongo import WebhookRefused, paymongo_signature_verify
from apps.collection.models import CollectionOrder
from apps.ledger.models import Posting
from apps.payout.models import Payout
from apps.payout.services import payout_submit
from tests.channels.conftest import PAYMONGO_PAYIN_CODE, PAYMONGO_PAYOUT_CODE
from tests.channels.paymongo_emulator import signature_header
from tests.collection.conftest import balances as collection_balances
from tests.collection.conftest import create_ok as pay_create_ok
from tests.payout.conftest import PHP_FEE, balances, fund
from tests.payout.conftest import create_ok as payout_create_ok

pytestmark = pytest.mark.django_db(transaction=True)

FUNDS = 10_000_000
AMOUNT = 150000


def url(live_server, code: str) -> str:
    return f"{live_server.url}/channels/paymongo/{code}/webhook"


def opened_session(merchant, emulator, **params) -> tuple[CollectionOrder, dict]:
    order = pay_create_ok(Client(), merchant, **{"product_code": "PHP_COLLECT_D0", "amount": AMOUNT, **params})
    assert Client().get(f"/pay/{order.pay_token}").status_code == 302
    [session] = emulator.sessions_by_reference(order.platform_order_no)
    return order, session


def submitted_payout(merchant) -> tuple[Payout, str]:
    fund(merchant, FUNDS)
    payout = payout_create_ok(Client(), merchant, amount=AMOUNT, bank_code="BDO", payee_account="0012345678")
    payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    return payout, payout.upstream_reference


def gets(emulator) -> int:
    return sum(1 for method, *_ in emulator.requests if method == "GET")


# --- the signature, as documented --------------------------------------------------------------------------


def test_signature_is_hmac_sha256_of_timestamp_dot_raw_body_compared_per_mode(settings):
    body, secret, now = b'{"data": {"id": "evt_1"}}', "whsk_secret", 1_700_000_000
    test_header = signature_header(body=body, secret=secret, timestamp=now, livemode=False)
    live_header = signature_header(body=body, secret=secret, timestamp=now, livemode=True)
    paymongo_signature_verify(header=test_header, body=body, secret=secret, livemode=False, now=now)
    paymongo_signature_verify(header=live_header, body=body, secret=secret, livemode=True, now=now + 299)
    refused = [
        dict(header=test_header, livemode=True),            # te only, channel live: li is compared (empty)
        dict(header=live_header, livemode=False),           # li only, channel in test mode
        dict(header=test_header, body=body + b" "),         # the raw body changed by one byte
        dict(header=test_header, secret="whsk_other"),      # another webhook's secret
        dict(header=test_header, now=now + 301),            # stale: outside the 300 s tolerance
        dict(header=test_header, now=now - 301),            # from the future
        dict(header=test_header.replace("t=", "x="), now=now),  # no timestamp
        dict(header=""),
        dict(header=test_header, secret=""),                # no secret stored: never "matches"
    ]
    for case in refused:
        args = {"header": test_header, "body": body, "secret": secret, "livemode": False, "now": now, **case}
        with pytest.raises(WebhookRefused):
            paymongo_signature_verify(**args)


# --- pay-in -------------------------------------------------------------------------------------------------


def test_checkout_paid_webhook_credits_once_and_duplicates_and_replays_change_nothing(
        paymongo_channels, merchant, paymongo_emulator, live_server):
    order, session = opened_session(merchant, paymongo_emulator)
    # The event's body says paid, PayMongo's API does not (yet): the body is not believed.
    lie = {**session, "attributes": {**session["attributes"], "payments": [
        {"id": "pay_fake", "type": "payment", "attributes": {"amount": AMOUNT, "currency": "PHP", "status": "paid"}}]}}
    reply = paymongo_emulator.webhook(url(live_server, PAYMONGO_PAYIN_CODE), "checkout_session.payment.paid", lie)
    assert (reply.status_code, reply.json()["changed"]) == (200, None)
    order.refresh_from_db()
    assert order.status == "CREATED"

    paymongo_emulator.pay_session(session["id"])
    event = paymongo_emulator.event("checkout_session.payment.paid", paymongo_emulator.sessions[session["id"]])
    signed = signature_header(body=event, secret=paymongo_emulator.webhook_secret, timestamp=int(time.time()),
                              livemode=False)
    reply = paymongo_emulator.webhook(url(live_server, PAYMONGO_PAYIN_CODE), "", {}, body=event, signature=signed)
    assert (reply.status_code, reply.json()["changed"]) == (200, "paid")
    order.refresh_from_db()
    assert (order.status, order.upstream_reference) == ("SUCCESS", session["id"])
    after = (collection_balances(merchant), Posting.objects.count())
    assert after[0]["available"] == AMOUNT - order.fee
    # PayMongo retries, and the captured request is replayed as it was (within the tolerance): nothing moves twice
    for _ in range(2):
        reply = paymongo_emulator.webhook(url(live_server, PAYMONGO_PAYIN_CODE), "", {}, body=event, signature=signed)
        assert (reply.status_code, reply.json()["changed"]) == (200, None)
    assert paymongo_emulator.session_webhook(session["id"], url(live_server, PAYMONGO_PAYIN_CODE)).json()[
        "changed"] is None
    assert (collection_balances(merchant), Posting.objects.count()) == after


def test_forged_stale_or_other_mode_webhooks_are_refused_before_anything_is_read(paymongo_channels, merchant,
                                                                               paymongo_emulator, live_server):
    order, session = opened_session(merchant, paymongo_emulator)
    paymongo_emulator.pay_session(session["id"])
    target = url(live_server, PAYMONGO_PAYIN_CODE)
    before = gets(paymongo_emulator)
    replies = [
        paymongo_emulator.session_webhook(session["id"], target, secret="whsk_forged"),
        paymongo_emulator.session_webhook(session["id"], target, signature=""),
        paymongo_emulator.session_webhook(session["id"], target, signature="t=1,te=00,li="),
        paymongo_emulator.session_webhook(session["id"], target, timestamp=int(time.time()) - 3600),  # replayed later
        # a live-mode event signed as live (li) at a test-mode channel: li is not what it compares
        paymongo_emulator.session_webhook(session["id"], target, livemode=True),
    ]
    # a live-mode event that a test signature covers: the signature holds, the mode does not
    event = paymongo_emulator.event("checkout_session.payment.paid", paymongo_emulator.sessions[session["id"]],
                                    livemode=True)
    replies.append(paymongo_emulator.webhook(target, "", {}, body=event, signature=signature_header(
        body=event, secret=paymongo_emulator.webhook_secret, timestamp=int(time.time()), livemode=False)))
    assert [r.status_code for r in replies] == [403] * 6
    assert gets(paymongo_emulator) == before  # refused before PayMongo's API was asked
    order.refresh_from_db()
    assert order.status == "CREATED" and not Posting.objects.filter(cause=order.platform_order_no).exists()
    # an unknown channel, and the payout channel's URL (its own secret), are no way round it either
    assert paymongo_emulator.session_webhook(session["id"], url(live_server, "NOPE")).status_code == 404
    from apps.channels.services import channel_credentials_set

    channel_credentials_set(channel=paymongo_channels["payout"], callback_token="whsk_payouts_own")
    assert paymongo_emulator.session_webhook(session["id"], url(live_server, PAYMONGO_PAYOUT_CODE)).status_code == 403


def test_a_live_channel_takes_live_events_signed_li(paymongo_channels, merchant, paymongo_emulator, live_server):
    from apps.channels.services import channel_credentials_set

    paymongo_emulator.secret_key, paymongo_emulator.livemode = "sk_live_emulator", True
    channel_credentials_set(channel=paymongo_channels["payin"], secret_key="sk_live_emulator")
    order, session = opened_session(merchant, paymongo_emulator)
    paymongo_emulator.pay_session(session["id"])
    target = url(live_server, PAYMONGO_PAYIN_CODE)
    assert paymongo_emulator.session_webhook(session["id"], target, livemode=False).status_code == 403  # test event
    reply = paymongo_emulator.session_webhook(session["id"], target)
    assert (reply.status_code, reply.json()["changed"]) == (200, "paid")


def test_expired_session_webhook_expires_the_order_and_a_foreign_session_is_ignored(
        paymongo_channels, merchant, paymongo_emulator, live_server):
    from datetime import timedelta

    from django.utils import timezone

    order, session = opened_session(merchant, paymongo_emulator, expire_seconds=60)
    CollectionOrder.objects.filter(pk=order.pk).update(expire_at=timezone.now() - timedelta(seconds=1))
    paymongo_emulator.expire_session(session["id"])
    reply = paymongo_emulator.webhook(url(live_server, PAYMONGO_PAYIN_CODE), "checkout_session.expired",
                                      paymongo_emulator.sessions[session["id"]])
    assert (reply.status_code, reply.json()["changed"]) == (200, "expired")
    order.refresh_from_db()
    assert order.status == "EXPIRED"
    # another system's session on the same account, and an id PayMongo does not know: acknowledged, nothing moves
    foreign = paymongo_emulator._session_create({"data": {"attributes": {
        "line_items": [{"name": "x", "amount": 500, "currency": "PHP", "quantity": 1}],
        "payment_method_types": ["gcash"], "reference_number": "SOMEONE-ELSE-1"}}})[1]["data"]
    paymongo_emulator.pay_session(foreign["id"])
    for resource in (paymongo_emulator.sessions[foreign["id"]], {"id": "cs_unknown", "type": "checkout_session"}):
        reply = paymongo_emulator.webhook(url(live_server, PAYMONGO_PAYIN_CODE), "checkout_session.payment.paid",
                                          resource)
        assert (reply.status_code, reply.json()["changed"]) == (200, None)
    assert not Posting.objects.filter(cause__startswith="SOMEONE-ELSE").exists()


def test_a_session_paid_for_less_than_the_order_credits_nothing(paymongo_channels, merchant, paymongo_emulator,
                                                                live_server):
    order, session = opened_session(merchant, paymongo_emulator)
    paymongo_emulator.pay_session(session["id"], amount=AMOUNT - 1)
    reply = paymongo_emulator.session_webhook(session["id"], url(live_server, PAYMONGO_PAYIN_CODE))
    assert (reply.status_code, reply.json()["changed"]) == (200, None)
    order.refresh_from_db()
    assert order.status == "CREATED" and not Posting.objects.filter(cause=order.platform_order_no).exists()


# --- payout -------------------------------------------------------------------------------------------------


def test_transfer_succeeded_webhook_pays_once_and_the_body_is_not_believed(paymongo_channels, merchant,
                                                                          paymongo_emulator, live_server):
    payout, transfer_id = submitted_payout(merchant)
    target = url(live_server, PAYMONGO_PAYOUT_CODE)
    lie = {**paymongo_emulator.transfers[transfer_id]}
    lie["attributes"] = {**lie["attributes"], "status": "succeeded"}
    reply = paymongo_emulator.webhook(target, "transfer.succeeded", lie)  # PayMongo's API still says pending
    assert (reply.status_code, reply.json()["changed"]) == (200, None)
    paymongo_emulator.settle_transfer(transfer_id, "succeeded")
    for expected in ("succeeded", None, None):
        reply = paymongo_emulator.transfer_webhook(transfer_id, target)
        assert (reply.status_code, reply.json()["changed"]) == (200, expected)
    payout.refresh_from_db()
    assert payout.status == "SUCCESS"
    assert balances(merchant) == {"available": FUNDS - AMOUNT - PHP_FEE, "settling": 0, "frozen": 0}
    # the pay-in channel's URL acts on checkout sessions only: a transfer event there changes nothing
    reply = paymongo_emulator.transfer_webhook(transfer_id, url(live_server, PAYMONGO_PAYIN_CODE))
    assert (reply.status_code, reply.json()["changed"]) == (200, None)


def test_transfer_failed_webhook_fails_it_and_the_funds_come_back_and_a_late_success_moves_nothing(
        paymongo_channels, merchant, paymongo_emulator, live_server):
    payout, transfer_id = submitted_payout(merchant)
    paymongo_emulator.settle_transfer(transfer_id, "failed", failure_code="account_closed")
    reply = paymongo_emulator.transfer_webhook(transfer_id, url(live_server, PAYMONGO_PAYOUT_CODE))
    assert (reply.status_code, reply.json()["changed"]) == (200, "failed")
    payout.refresh_from_db()
    assert (payout.status, payout.fail_reason) == ("FAILED", "account_closed")
    assert balances(merchant) == {"available": FUNDS, "settling": 0, "frozen": 0}
    before = (balances(merchant), Posting.objects.count())
    lie = {**paymongo_emulator.transfers[transfer_id]}
    lie["attributes"] = {**lie["attributes"], "status": "succeeded"}
    assert paymongo_emulator.webhook(url(live_server, PAYMONGO_PAYOUT_CODE), "transfer.succeeded",
                                     lie).json()["changed"] is None
    assert (balances(merchant), Posting.objects.count()) == before


def test_another_transfer_with_our_reference_number_moves_nothing(paymongo_channels, merchant, paymongo_emulator,
                                                                  live_server):
    payout, transfer_id = submitted_payout(merchant)
    paymongo_emulator.transfers["tr_foreign"] = {"id": "tr_foreign", "type": "transfer", "attributes": {
        **paymongo_emulator.transfers[transfer_id]["attributes"], "status": "succeeded"}}
    reply = paymongo_emulator.transfer_webhook("tr_foreign", url(live_server, PAYMONGO_PAYOUT_CODE))
    assert (reply.status_code, reply.json()["changed"]) == (200, None)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", transfer_id)


def test_webhook_while_paymongo_api_cannot_be_asked_is_503_and_moves_nothing(paymongo_channels, merchant,
                                                                            paymongo_emulator, live_server):
    payout, transfer_id = submitted_payout(merchant)
    paymongo_emulator.settle_transfer(transfer_id, "succeeded")
    paymongo_emulator.outage(True)
    reply = paymongo_emulator.transfer_webhook(transfer_id, url(live_server, PAYMONGO_PAYOUT_CODE))
    assert reply.status_code == 503
    payout.refresh_from_db()
    assert payout.status == "PROCESSING"
    paymongo_emulator.outage(False)  # PayMongo retries: applied once
    assert paymongo_emulator.transfer_webhook(transfer_id, url(live_server, PAYMONGO_PAYOUT_CODE)).json()[
        "changed"] == "succeeded"


# --- races ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["payin", "payout"])
def test_twelve_concurrent_identical_webhooks_report_the_change_once(kind, paymongo_channels, merchant,
                                                                     paymongo_emulator, live_server, settings):
    from tests.helpers import at_once

    settings.CHANNEL_HTTP_TIMEOUT_SECONDS = 10  # twelve re-reads at once on a busy host: none may give up (503)
    if kind == "payin":
        order, session = opened_session(merchant, paymongo_emulator)
        paymongo_emulator.pay_session(session["id"])
        send, expected, cause = (lambda _: paymongo_emulator.session_webhook(
            session["id"], url(live_server, PAYMONGO_PAYIN_CODE))), "paid", order.platform_order_no
    else:
        payout, transfer_id = submitted_payout(merchant)
        paymongo_emulator.settle_transfer(transfer_id, "succeeded")
        send, expected, cause = (lambda _: paymongo_emulator.transfer_webhook(
            transfer_id, url(live_server, PAYMONGO_PAYOUT_CODE))), "succeeded", payout.platform_order_no
    replies = at_once(send, 12)
    assert [exc for _, exc in replies] == [None] * 12
    assert {response.status_code for response, _ in replies} == {200}
    changes = [response.json()["changed"] for response, _ in replies]
    assert sorted(changes, key=str) == [None] * 11 + [expected]
    postings = Posting.objects.filter(cause=cause)
    assert (postings.filter(kind="hold.settle") if kind == "payout" else postings).count() == 1  # moved once
