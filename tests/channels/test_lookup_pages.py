"""A lookup by our reference that has not read everything answers "unknown", never "not found" (docs/channels.md,
"Lookups by our reference"): against emulators whose lists page (a page cap below the limit asked for) and ignore
the reference filter, as a real upstream may. A re-submission after a lost answer finds the first transfer, payout
or invoice on a later page and sends nothing twice; the failover check moves a payout only after reading every page
and finding nothing of ours, and stays where it is when the list goes past the page bound or a later page fails."""

import logging
from decimal import Decimal

import pytest
from django.test import Client

from apps.channels.base import LookupUnknown, UpstreamDeclined, UpstreamUnavailable
from apps.channels.lookups import LOOKUP_PAGE_SIZE, LOOKUP_PAGES
from apps.channels.models import Channel, UpstreamPayin
from apps.channels.registry import payout_adapter
from apps.payout.models import Payout
from apps.payout.services import payout_submit
from tests.channels.conftest import paymongo_channel_create, xendit_channel_create
from tests.channels.test_failover import backdate, open_circuit, payout_new, submit
from tests.channels.test_paymongo_adapter import posted, resubmit_later
from tests.collection.conftest import create_ok as pay_create_ok
from tests.payout.conftest import PHP_FEE, balances, fund

pytestmark = pytest.mark.django_db

FUNDS = 10_000_000
AMOUNT = 150_000


@pytest.fixture
def shop(merchant):
    fund(merchant, FUNDS)
    return merchant


def channels_for_payouts(first: str, paymongo_emulator, xendit_emulator) -> dict[str, Channel]:
    """A PHP payout channel at each upstream, `first` ('paymongo' or 'xendit') at priority 1, the other at 2: the
    one a payout would move to."""
    paymongo = paymongo_channel_create(code="PAYMONGO_PHP_PAYOUT", direction=Channel.Direction.PAYOUT,
                                       emulator=paymongo_emulator, priority=1 if first == "paymongo" else 2)
    xendit = xendit_channel_create(code="XENDIT_PHP_PAYOUT", direction=Channel.Direction.PAYOUT,
                                   emulator=xendit_emulator)
    Channel.objects.filter(pk=xendit.pk).update(priority=1 if first == "xendit" else 2)
    return {"paymongo": paymongo, "xendit": Channel.objects.get(pk=xendit.pk)}


def ambiguous_first_submission(shop, emulator, endpoint: str, fault: str) -> Payout:
    """A payout on its priority-1 channel whose first submission was ambiguous (`fault`: 'timeout', the transfer
    exists and its answer was lost; '5xx', nothing was created): PROCESSING without a reference, funds frozen."""
    emulator.fail_next(endpoint, fault)
    payout = submit(payout_new(shop, amount=AMOUNT, bank_code="GCASH"))
    assert (payout.status, payout.upstream_reference) == (Payout.Status.PROCESSING, "")
    return payout


def failover_check_due(payout: Payout, settings) -> None:
    """Its channel's circuit is open and the submission is old enough for the failover to ask the channel by our
    key (docs/channels.md, "Failover")."""
    open_circuit(payout.channel)
    backdate(payout, seconds=settings.CHANNEL_FAILOVER_LOOKUP_AFTER_SECONDS + 1)


# --- PayMongo: GET /v2/transfers ----------------------------------------------------------------------------------


def test_a_resubmission_after_a_lost_answer_finds_the_transfer_on_page_2_and_sends_no_second(
        paymongo_channels, shop, paymongo_emulator):
    paymongo_emulator.reused_key = "ignore"  # the Idempotency-Key does not save us: only the lookup can
    paymongo_emulator.ignore_filters, paymongo_emulator.page_limit = True, 2
    payout = ambiguous_first_submission(shop, paymongo_emulator, "batch_transfers", "timeout")
    [first] = paymongo_emulator.transfers_by_reference(payout.platform_order_no)
    paymongo_emulator.transfers_of_others(3)  # newer than ours: page 1 holds two of them, page 2 the third and ours
    resubmit_later(payout)
    payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == (Payout.Status.PROCESSING, first["id"])
    assert len(posted(paymongo_emulator, "/v2/batch_transfers")) == 1  # nothing sent a second time
    assert [t["id"] for t in paymongo_emulator.transfers_by_reference(payout.platform_order_no)] == [first["id"]]
    assert any("after=" in path for method, path, _, _ in paymongo_emulator.requests if method == "GET")
    assert balances(shop) == {"available": FUNDS - AMOUNT - PHP_FEE, "settling": 0, "frozen": AMOUNT + PHP_FEE}


def test_the_failover_check_finds_the_transfer_on_page_2_and_the_payout_stays(
        bootstrapped, live, quick_breaker, shop, paymongo_emulator, xendit_emulator, settings):
    channels = channels_for_payouts("paymongo", paymongo_emulator, xendit_emulator)
    paymongo_emulator.ignore_filters, paymongo_emulator.page_limit = True, 2
    payout = ambiguous_first_submission(shop, paymongo_emulator, "batch_transfers", "timeout")
    assert payout.channel == channels["paymongo"]
    [first] = paymongo_emulator.transfers_by_reference(payout.platform_order_no)
    paymongo_emulator.transfers_of_others(3)
    failover_check_due(payout, settings)
    payout = submit(payout)
    assert (payout.channel, payout.upstream_reference) == (channels["paymongo"], "")
    assert xendit_emulator.payouts == {}  # never sent to the other channel: PayMongo holds it
    found = payout_adapter(channels["paymongo"]).disbursement_lookup(payout=payout)
    assert (found.outcome, found.reference) == ("pending", first["id"])
    assert balances(shop)["frozen"] == AMOUNT + PHP_FEE


def test_the_failover_check_past_the_page_bound_answers_unknown_and_the_payout_stays(
        bootstrapped, live, quick_breaker, shop, paymongo_emulator, xendit_emulator, settings, caplog):
    channels = channels_for_payouts("paymongo", paymongo_emulator, xendit_emulator)
    paymongo_emulator.ignore_filters, paymongo_emulator.page_limit = True, 2
    payout = ambiguous_first_submission(shop, paymongo_emulator, "batch_transfers", "5xx")  # nothing created
    paymongo_emulator.transfers_of_others(2 * LOOKUP_PAGES + 1)  # one page more than the bound, none of ours
    failover_check_due(payout, settings)
    adapter = payout_adapter(channels["paymongo"])
    with caplog.at_level(logging.ERROR, logger="apps.channels.lookups"), \
            pytest.raises(LookupUnknown, match=f"more than {LOOKUP_PAGES} pages"):
        adapter.disbursement_lookup(payout=payout)
    assert any("a person must look" in r.getMessage() for r in caplog.records)
    payout = submit(payout)
    assert (payout.channel, payout.status, payout.upstream_reference) == (
        channels["paymongo"], Payout.Status.PROCESSING, "")
    assert xendit_emulator.payouts == {} and balances(shop)["frozen"] == AMOUNT + PHP_FEE
    # the same list read to its end (pages as large as asked for): nothing of ours, so the payout may move
    paymongo_emulator.page_limit = LOOKUP_PAGE_SIZE
    payout = submit(payout)
    assert payout.channel == channels["xendit"]
    [moved] = xendit_emulator.payouts_by_reference(payout.platform_order_no)
    assert payout.upstream_reference == moved["id"]
    assert paymongo_emulator.transfers_by_reference(payout.platform_order_no) == []


@pytest.mark.parametrize("fault", ["5xx", "429"])
def test_an_error_on_page_2_is_unknown_and_the_payout_stays(fault, bootstrapped, live, quick_breaker, shop,
                                                            paymongo_emulator, xendit_emulator, settings):
    channels = channels_for_payouts("paymongo", paymongo_emulator, xendit_emulator)
    paymongo_emulator.ignore_filters, paymongo_emulator.page_limit = True, 2
    payout = ambiguous_first_submission(shop, paymongo_emulator, "batch_transfers", "5xx")
    paymongo_emulator.transfers_of_others(3)
    failover_check_due(payout, settings)
    paymongo_emulator.fail_next_page(fault)
    with pytest.raises(LookupUnknown, match="page 2") as unknown:
        payout_adapter(channels["paymongo"]).disbursement_lookup(payout=payout)
    assert not isinstance(unknown.value, UpstreamDeclined)  # a 429 on page 2 proves nothing about page 2's objects
    paymongo_emulator.fail_next_page(fault)
    payout = submit(payout)
    assert (payout.channel, payout.upstream_reference) == (channels["paymongo"], "")
    assert xendit_emulator.payouts == {}


def test_a_resubmission_whose_lookup_fails_on_page_2_sends_nothing_and_fails_nothing(paymongo_channels, shop,
                                                                                     paymongo_emulator):
    paymongo_emulator.reused_key = "ignore"
    paymongo_emulator.ignore_filters, paymongo_emulator.page_limit = True, 2
    payout = ambiguous_first_submission(shop, paymongo_emulator, "batch_transfers", "timeout")
    paymongo_emulator.transfers_of_others(3)
    resubmit_later(payout)
    paymongo_emulator.fail_next_page("5xx")
    with pytest.raises(LookupUnknown):
        payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == (Payout.Status.PROCESSING, "")
    assert len(posted(paymongo_emulator, "/v2/batch_transfers")) == 1
    assert balances(shop)["frozen"] == AMOUNT + PHP_FEE


def test_a_list_that_does_not_say_whether_more_follow_is_unknown_and_the_payout_stays(
        bootstrapped, live, quick_breaker, shop, paymongo_emulator, xendit_emulator, settings):
    channels = channels_for_payouts("paymongo", paymongo_emulator, xendit_emulator)
    payout = ambiguous_first_submission(shop, paymongo_emulator, "batch_transfers", "5xx")
    paymongo_emulator.omit_has_more = True
    failover_check_due(payout, settings)
    with pytest.raises(LookupUnknown, match="does not say whether more follow"):
        payout_adapter(channels["paymongo"]).disbursement_lookup(payout=payout)
    payout = submit(payout)
    assert (payout.channel, payout.upstream_reference) == (channels["paymongo"], "")
    assert xendit_emulator.payouts == {}


def test_a_lookup_refused_by_paymongo_fails_no_payout_whose_transfer_may_exist(paymongo_channels, shop,
                                                                               paymongo_emulator):
    paymongo_emulator.reused_key = "ignore"
    payout = ambiguous_first_submission(shop, paymongo_emulator, "batch_transfers", "timeout")
    [first] = paymongo_emulator.transfers_by_reference(payout.platform_order_no)
    paymongo_emulator.refuse_reference_filter = True  # the list cannot be filtered by our reference: unknown
    resubmit_later(payout)
    with pytest.raises(LookupUnknown, match="refused"):
        payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == (Payout.Status.PROCESSING, "")
    assert balances(shop) == {"available": FUNDS - AMOUNT - PHP_FEE, "settling": 0, "frozen": AMOUNT + PHP_FEE}
    assert len(posted(paymongo_emulator, "/v2/batch_transfers")) == 1
    paymongo_emulator.refuse_reference_filter = False  # answered again: the first transfer is found and bound
    payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert payout.upstream_reference == first["id"]


def test_a_transfer_of_our_reference_whose_amount_cannot_be_read_is_unknown_and_nothing_is_sent_again(
        paymongo_channels, shop, paymongo_emulator):
    paymongo_emulator.reused_key = "ignore"
    payout = ambiguous_first_submission(shop, paymongo_emulator, "batch_transfers", "timeout")
    [first] = paymongo_emulator.transfers_by_reference(payout.platform_order_no)
    first["attributes"]["amount"] = "1500.00"  # an answer we cannot read as centavos: it may still be ours
    resubmit_later(payout)
    with pytest.raises(LookupUnknown, match="amount that cannot be read"):
        payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == (Payout.Status.PROCESSING, "")
    assert len(posted(paymongo_emulator, "/v2/batch_transfers")) == 1


# --- Xendit: GET /v2/payouts ----------------------------------------------------------------------------------


def test_xendit_refused_resubmission_finds_the_first_payout_on_page_2_and_fails_nothing(
        xendit_channels, shop, xendit_emulator):
    xendit_emulator.ignore_filters, xendit_emulator.page_limit = True, 2
    payout = ambiguous_first_submission(shop, xendit_emulator, "payouts", "timeout")
    [first] = xendit_emulator.payouts_by_reference(payout.platform_order_no)
    xendit_emulator.payouts_of_others(3, amount=999)
    resubmit_later(payout)
    xendit_emulator.fail_next("payouts", "400")  # the re-submission refused: proves nothing about the first
    with pytest.raises(UpstreamUnavailable, match="none bound to its idempotency key"):
        payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == (Payout.Status.PROCESSING, "")
    assert balances(shop)["frozen"] == AMOUNT + PHP_FEE  # not refunded for money Xendit holds to pay out
    assert [p["id"] for p in xendit_emulator.payouts_by_reference(payout.platform_order_no)] == [first["id"]]


def test_xendit_payout_of_our_reference_whose_amount_cannot_be_read_keeps_a_refused_resubmission_from_failing(
        xendit_channels, shop, xendit_emulator):
    payout = ambiguous_first_submission(shop, xendit_emulator, "payouts", "timeout")
    [first] = xendit_emulator.payouts_by_reference(payout.platform_order_no)
    xendit_emulator.payouts[first["id"]]["amount"] = Decimal("0.001")  # not a whole number of centavos
    resubmit_later(payout)
    xendit_emulator.fail_next("payouts", "400")
    with pytest.raises(LookupUnknown, match="amount that cannot be read"):
        payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == (Payout.Status.PROCESSING, "")
    assert balances(shop)["frozen"] == AMOUNT + PHP_FEE


def test_xendit_409_binds_only_a_payout_of_our_reference_when_the_list_ignores_the_filter(
        xendit_channels, shop, xendit_emulator):
    xendit_emulator.reused_key = "409"
    xendit_emulator.ignore_filters, xendit_emulator.page_limit = True, 2
    payout = ambiguous_first_submission(shop, xendit_emulator, "payouts", "timeout")
    [first] = xendit_emulator.payouts_by_reference(payout.platform_order_no)
    others = xendit_emulator.payouts_of_others(3, amount=AMOUNT // 100)  # our amount and currency, not our reference
    resubmit_later(payout)
    payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert payout.upstream_reference == first["id"] and payout.upstream_reference not in others
    assert len(xendit_emulator.payouts) == 4  # nothing sent a second time


def test_xendit_failover_check_moves_only_after_every_page_and_stays_past_the_bound_or_on_a_page_error(
        bootstrapped, live, quick_breaker, shop, paymongo_emulator, xendit_emulator, settings):
    channels = channels_for_payouts("xendit", paymongo_emulator, xendit_emulator)
    xendit_emulator.ignore_filters, xendit_emulator.page_limit = True, 2
    payout = ambiguous_first_submission(shop, xendit_emulator, "payouts", "5xx")  # nothing created
    assert payout.channel == channels["xendit"]
    xendit_emulator.payouts_of_others(2 * LOOKUP_PAGES + 1)
    failover_check_due(payout, settings)
    with pytest.raises(LookupUnknown, match=f"more than {LOOKUP_PAGES} pages"):
        payout_adapter(channels["xendit"]).disbursement_lookup(payout=payout)
    payout = submit(payout)
    assert (payout.channel, payout.upstream_reference) == (channels["xendit"], "")
    xendit_emulator.page_limit = LOOKUP_PAGE_SIZE  # one page now: an error on the next page cannot happen ...
    xendit_emulator.payouts_of_others(LOOKUP_PAGE_SIZE)  # ... until there are two
    xendit_emulator.fail_next_page("5xx")
    payout = submit(payout)
    assert (payout.channel, payout.upstream_reference) == (channels["xendit"], "")
    assert paymongo_emulator.transfers == {}
    # every page read, nothing of ours among everyone's payouts: the payout moves, and is sent once
    payout = submit(payout)
    assert payout.channel == channels["paymongo"]
    [moved] = paymongo_emulator.transfers_by_reference(payout.platform_order_no)
    assert payout.upstream_reference == moved["id"]
    assert xendit_emulator.payouts_by_reference(payout.platform_order_no) == []


# --- Xendit: GET /v2/invoices (pay-ins) ---------------------------------------------------------------------------


def test_a_payin_opened_again_after_a_lost_answer_finds_its_invoice_on_page_2_and_opens_no_second(
        xendit_channels, merchant, xendit_emulator):
    xendit_emulator.ignore_filters = True
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=20000)
    xendit_emulator.fail_next("invoices", "timeout")  # the invoice exists, its answer was lost
    assert Client().get(f"/pay/{order.pay_token}").status_code == 503
    [first] = xendit_emulator.invoice_by_external_id(order.platform_order_no)
    xendit_emulator.invoices_of_others(LOOKUP_PAGE_SIZE)  # a full page of newer invoices before ours
    xendit_emulator.fail_next_page("5xx")
    # page 2 cannot be read: unknown, so no second invoice (the only pay-in channel: the page says "not available")
    assert Client().get(f"/pay/{order.pay_token}").status_code == 503
    assert not UpstreamPayin.objects.exists()
    again = Client().get(f"/pay/{order.pay_token}")
    assert again.status_code == 302 and again["Location"] == first["invoice_url"]
    assert [i["id"] for i in xendit_emulator.invoice_by_external_id(order.platform_order_no)] == [first["id"]]
    assert UpstreamPayin.objects.get(platform_order_no=order.platform_order_no).reference == first["id"]


def test_a_payin_whose_invoice_cursor_is_not_honoured_opens_no_second_invoice(xendit_channels, merchant,
                                                                             xendit_emulator):
    """Xendit's invoice cursor is named differently in its SDK and its API reference: should the one we send be
    ignored, the next page repeats the first, and the lookup is unknown rather than "none"."""
    xendit_emulator.ignore_filters, xendit_emulator.ignore_cursor = True, True
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=20000)
    xendit_emulator.fail_next("invoices", "timeout")
    assert Client().get(f"/pay/{order.pay_token}").status_code == 503
    xendit_emulator.invoices_of_others(LOOKUP_PAGE_SIZE)
    assert Client().get(f"/pay/{order.pay_token}").status_code == 503
    assert len(xendit_emulator.invoice_by_external_id(order.platform_order_no)) == 1
    assert not UpstreamPayin.objects.exists()
