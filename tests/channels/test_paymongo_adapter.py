"""The PayMongo adapter against the local emulator, in a live deployment: what goes upstream (centavos, the
reference_number, the Idempotency-Key, the receiving institution and rail), what a timeout, a 5xx or a refusal on
create leaves behind, which of the two (a definite refusal or an ambiguity) the adapter reports, and the check of
our bank codes against PayMongo's receiving institutions when a channel is configured."""

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from apps.channels.base import UpstreamRejected, UpstreamUnavailable
from apps.channels.models import UpstreamPayin
from apps.channels.paymongo import (RECEIVING_INSTITUTIONS, PayMongoPayoutAdapter, paymongo_configuration_problems,
                                    transfer_provider)
from apps.collection.models import CollectionOrder
from apps.payout.models import Payout
from apps.payout.services import payout_submit
from tests.collection.conftest import create_ok as pay_create_ok
from tests.payout.conftest import PHP_FEE, balances, fund
from tests.payout.conftest import create_ok as payout_create_ok

pytestmark = pytest.mark.django_db

FUNDS = 10_000_000


def posted(emulator, path: str) -> list[tuple[dict, dict]]:
    return [(headers, json.loads(raw)) for method, p, headers, raw in emulator.requests
            if method == "POST" and p == path]


def resubmit_later(payout: Payout) -> None:
    Payout.objects.filter(pk=payout.pk).update(submitted_at=timezone.now() - timedelta(minutes=5))


# --- pay-in -------------------------------------------------------------------------------------------------


def test_pay_url_forwards_the_payer_to_one_checkout_session_of_e_wallets_and_qrph(paymongo_channels, merchant,
                                                                                 paymongo_emulator):
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=150000, subject="Two coffees")
    assert order.channel == paymongo_channels["payin"]
    first = Client().get(f"/pay/{order.pay_token}")
    assert first.status_code == 302
    [session] = paymongo_emulator.sessions_by_reference(order.platform_order_no)
    assert first["Location"] == session["attributes"]["checkout_url"]
    [(headers, body)] = posted(paymongo_emulator, "/v1/checkout_sessions")
    assert headers["Idempotency-Key"] == order.platform_order_no
    attributes = body["data"]["attributes"]
    assert attributes["line_items"] == [{"name": "Two coffees", "amount": 150000, "currency": "PHP", "quantity": 1}]
    assert attributes["payment_method_types"] == ["gcash", "paymaya", "grab_pay", "qrph"]
    assert attributes["reference_number"] == order.platform_order_no
    # Opened again: the same session, nothing new upstream.
    assert Client().get(f"/pay/{order.pay_token}")["Location"] == session["attributes"]["checkout_url"]
    assert len(paymongo_emulator.sessions) == 1
    assert UpstreamPayin.objects.get(platform_order_no=order.platform_order_no).reference == session["id"]


@pytest.mark.parametrize("fault", ["5xx", "timeout"])
def test_session_create_failure_shows_unavailable_and_the_next_opening_forwards_to_one_session(
        fault, paymongo_channels, merchant, paymongo_emulator):
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=20000)
    paymongo_emulator.fail_next("checkout_sessions", fault)
    page = Client().get(f"/pay/{order.pay_token}")
    assert page.status_code == 503 and b'data-testid="unavailable"' in page.content
    assert not UpstreamPayin.objects.exists()
    again = Client().get(f"/pay/{order.pay_token}")
    assert again.status_code == 302
    opened = UpstreamPayin.objects.get(platform_order_no=order.platform_order_no)
    # a timeout's session exists upstream and its Idempotency-Key gets it back; a 5xx created none
    assert [s["id"] for s in paymongo_emulator.sessions_by_reference(order.platform_order_no)] == [opened.reference]
    assert again["Location"] == opened.redirect_url


def test_a_session_still_open_after_the_order_expired_is_expired_upstream_by_reconciliation(
        paymongo_channels, merchant, paymongo_emulator):
    from apps.channels.registry import payin_adapter

    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=20000)
    Client().get(f"/pay/{order.pay_token}")
    [session] = paymongo_emulator.sessions_by_reference(order.platform_order_no)
    adapter = payin_adapter(order.channel)
    assert adapter.payin_state(order=order, reference=session["id"]).outcome == "pending"  # not yet expired
    CollectionOrder.objects.filter(pk=order.pk).update(expire_at=timezone.now() - timedelta(seconds=1))
    order.refresh_from_db()
    state = adapter.payin_state(order=order, reference=session["id"])
    assert (state.outcome, state.upstream_status) == ("expired", "EXPIRED")
    assert paymongo_emulator.sessions[session["id"]]["attributes"]["status"] == "expired"  # no one pays it later
    # a session paid in the meantime is not expired (PayMongo refuses) and is reported paid
    other = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=20000)
    Client().get(f"/pay/{other.pay_token}")
    [paid] = paymongo_emulator.sessions_by_reference(other.platform_order_no)
    paymongo_emulator.pay_session(paid["id"])
    CollectionOrder.objects.filter(pk=other.pk).update(expire_at=timezone.now() - timedelta(seconds=1))
    other.refresh_from_db()
    state = adapter.payin_state(order=other, reference=paid["id"])
    assert (state.outcome, state.amount, state.currency, state.platform_order_no) == (
        "paid", 20000, "PHP", other.platform_order_no)


# --- payout -------------------------------------------------------------------------------------------------


def a_payout(merchant, **params) -> Payout:
    fund(merchant, FUNDS)
    return payout_create_ok(Client(), merchant, **{"amount": 150000, "bank_code": "GCASH",
                                                   "payee_account": "09171234567", **params})


def test_payout_goes_upstream_as_one_instapay_transfer_with_the_order_number(paymongo_channels, merchant,
                                                                           paymongo_emulator):
    payout = a_payout(merchant)
    assert payout.channel == paymongo_channels["payout"]
    submitted = payout_submit(payout_id=payout.pk)
    [(headers, body)] = posted(paymongo_emulator, "/v2/batch_transfers")
    [transfer] = body["data"]["attributes"]["transfers"]
    assert headers["Idempotency-Key"] == payout.platform_order_no
    assert (transfer["amount"], transfer["currency"], transfer["provider"], transfer["reference_number"]) == (
        150000, "PHP", "instapay", payout.platform_order_no)
    assert transfer["destination_account"] == {"number": "09171234567", "name": "Juan dela Cruz",
                                               "bic": RECEIVING_INSTITUTIONS["GCASH"]}
    assert transfer["source_account"]["bic"] == "PAEYPHM2XXX"  # our wallet, read from GET /v2/wallets
    [upstream] = paymongo_emulator.transfers_by_reference(payout.platform_order_no)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", upstream["id"]) == (
        "PROCESSING", submitted.upstream_reference)
    assert balances(merchant) == {"available": FUNDS - 150000 - PHP_FEE, "settling": 0, "frozen": 150000 + PHP_FEE}


def test_above_instapay_limit_goes_by_pesonet():
    assert transfer_provider(5_000_000) == "instapay" and transfer_provider(5_000_001) == "pesonet"


@pytest.mark.parametrize("reused_key", ["replay", "ignore"])
@pytest.mark.parametrize("fault", ["timeout", "5xx"])
def test_create_lost_to_timeout_or_5xx_is_resubmitted_and_transferred_once(fault, reused_key, paymongo_channels,
                                                                          merchant, paymongo_emulator):
    paymongo_emulator.reused_key = reused_key  # whether PayMongo honours the Idempotency-Key or not
    payout = a_payout(merchant)
    paymongo_emulator.fail_next("batch_transfers", fault)
    with pytest.raises(UpstreamUnavailable):
        payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", "")  # not lost: the sweeper's to resend
    assert len(paymongo_emulator.transfers_by_reference(payout.platform_order_no)) == (1 if fault == "timeout" else 0)
    payout_submit(payout_id=payout.pk)  # within RESUBMIT_AFTER nothing is sent again
    assert len(posted(paymongo_emulator, "/v2/batch_transfers")) == 1
    resubmit_later(payout)
    payout_submit(payout_id=payout.pk)
    [upstream] = paymongo_emulator.transfers_by_reference(payout.platform_order_no)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", upstream["id"])
    # after a timeout the lookup by reference_number found the first transfer: nothing was posted again
    assert len(posted(paymongo_emulator, "/v2/batch_transfers")) == (1 if fault == "timeout" else 2)
    assert balances(merchant)["frozen"] == 150000 + PHP_FEE


def test_payout_refused_on_create_fails_and_the_funds_come_back(paymongo_channels, merchant, paymongo_emulator):
    payout = a_payout(merchant)
    paymongo_emulator.fail_next("batch_transfers", "400")
    payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert (payout.status, payout.fail_reason) == ("FAILED", "refused upstream: parameter_invalid")
    assert balances(merchant) == {"available": FUNDS, "settling": 0, "frozen": 0}
    assert not paymongo_emulator.transfers


def test_refusal_and_ambiguity_are_told_apart_for_failover(paymongo_channels, merchant, paymongo_emulator):
    """The routing helper may send a payout elsewhere only when PayMongo definitely did not take it: submit_transfer
    raises UpstreamRejected then, and UpstreamUnavailable whenever it might have."""
    adapter = PayMongoPayoutAdapter()
    refused = a_payout(merchant, mch_order_no="REFUSED")
    paymongo_emulator.fail_next("batch_transfers", "400")
    with pytest.raises(UpstreamRejected):
        adapter.submit_transfer(payout=refused)
    assert not paymongo_emulator.transfers_by_reference(refused.platform_order_no)
    unmapped = a_payout(merchant, mch_order_no="GRAB", bank_code="GRABPAY")
    with pytest.raises(UpstreamRejected, match="receiving institution"):
        adapter.submit_transfer(payout=unmapped)
    assert not any(p == "/v2/batch_transfers" and "GRAB" in raw.decode() for _, p, _, raw in paymongo_emulator.requests)

    for fault in ("timeout", "5xx", "429"):
        ambiguous = a_payout(merchant, mch_order_no=f"AMBIGUOUS-{fault}")
        paymongo_emulator.fail_next("batch_transfers", fault)
        with pytest.raises(UpstreamUnavailable):
            adapter.submit_transfer(payout=ambiguous)
    paymongo_emulator.outage(True)
    down = a_payout(merchant, mch_order_no="DOWN")
    with pytest.raises(UpstreamUnavailable):
        adapter.submit_transfer(payout=down)
    paymongo_emulator.outage(False)
    paymongo_emulator.latency(1.5)  # slower than the client's timeout (1 s)
    with pytest.raises(UpstreamUnavailable):
        adapter.submit_transfer(payout=down)
    paymongo_emulator.latency(0)
    # a refusal of a re-submission while the first transfer is listed binds the first, fails nothing
    first = a_payout(merchant, mch_order_no="FIRST")
    paymongo_emulator.fail_next("batch_transfers", "timeout")
    with pytest.raises(UpstreamUnavailable):
        adapter.submit_transfer(payout=first)
    [upstream] = paymongo_emulator.transfers_by_reference(first.platform_order_no)
    assert adapter.submit_transfer(payout=first) == upstream["id"]


def test_two_transfers_that_may_be_ours_are_taken_for_neither(paymongo_channels, merchant, paymongo_emulator, caplog):
    payout = a_payout(merchant)
    payout_submit(payout_id=payout.pk)
    [ours] = paymongo_emulator.transfers_by_reference(payout.platform_order_no)
    # someone else on the account sent one with our reference_number, amount and account; our answer was lost
    paymongo_emulator.transfers["tr_other"] = {"id": "tr_other", "type": "transfer",
                                               "attributes": dict(ours["attributes"])}
    Payout.objects.filter(pk=payout.pk).update(upstream_reference="")
    resubmit_later(payout)
    with caplog.at_level("ERROR", logger="apps.channels.paymongo"), pytest.raises(UpstreamUnavailable):
        payout_submit(payout_id=payout.pk)
    assert any("none is taken for ours" in r.getMessage() for r in caplog.records)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", "")
    assert len(posted(paymongo_emulator, "/v2/batch_transfers")) == 1  # nothing sent a second time


def test_wrong_secret_key_fails_no_payout_and_the_resubmission_after_the_fix_transfers(paymongo_channels, merchant,
                                                                                     paymongo_emulator):
    from apps.channels.services import channel_credentials_set

    channel_credentials_set(channel=paymongo_channels["payout"], secret_key="sk_test_wrong")
    payout = a_payout(merchant)
    with pytest.raises(UpstreamUnavailable, match="401"):
        payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", "")
    channel_credentials_set(channel=paymongo_channels["payout"], secret_key=paymongo_emulator.secret_key)
    resubmit_later(payout)
    payout_submit(payout_id=payout.pk)
    assert len(paymongo_emulator.transfers_by_reference(payout.platform_order_no)) == 1


# --- configuration ------------------------------------------------------------------------------------------


def test_configuration_check_asks_paymongo_for_its_receiving_institutions(paymongo_channels, paymongo_emulator):
    channel = paymongo_channels["payout"]
    assert paymongo_configuration_problems(channel=channel, secret_key=paymongo_emulator.secret_key) == []
    # PayMongo stops listing Metrobank: our MBTC code maps to a BIC it does not know
    paymongo_emulator.institutions = {provider: [row for row in rows if row[1] != "MBTCPHMMXXX"]
                                      for provider, rows in paymongo_emulator.institutions.items()}
    [problem] = paymongo_configuration_problems(channel=channel, secret_key=paymongo_emulator.secret_key)
    assert "MBTC" in problem and "MBTCPHMMXXX" in problem
    assert "could not be asked" in paymongo_configuration_problems(channel=channel, secret_key="sk_test_wrong")[0]
    usd = type(channel)(code="X", adapter="paymongo", direction="payin", currency_id="USD")
    assert paymongo_configuration_problems(channel=usd, secret_key="k") == ["PayMongo serves PHP only, not USD."]


def test_a_submission_under_way_elsewhere_is_waited_for_and_a_dead_holders_lease_expires(
        paymongo_channels, merchant, paymongo_emulator, settings):
    from apps.channels.models import UpstreamSubmissionLease

    settings.CHANNEL_HTTP_TIMEOUT_SECONDS = 0.2  # a lease of SUBMISSION_LEASE_CALLS timeouts: under three seconds
    payout = a_payout(merchant)
    adapter = PayMongoPayoutAdapter()
    # another worker holds the lease (it is sending this payout right now): we wait, then give up without sending
    UpstreamSubmissionLease.objects.create(platform_order_no=payout.platform_order_no,
                                           leased_until=timezone.now() + timedelta(minutes=5))
    with pytest.raises(UpstreamUnavailable, match="under way"):
        adapter.submit_transfer(payout=payout)
    assert not posted(paymongo_emulator, "/v2/batch_transfers")
    # that worker died: its lease runs out, and the next submission sends the payout once
    UpstreamSubmissionLease.objects.filter(platform_order_no=payout.platform_order_no).update(
        leased_until=timezone.now() - timedelta(seconds=1))
    reference = adapter.submit_transfer(payout=payout)
    assert [t["id"] for t in paymongo_emulator.transfers_by_reference(payout.platform_order_no)] == [reference]
    assert adapter.submit_transfer(payout=payout) == reference  # released: the next call takes it and finds ours
