"""The Xendit adapter against the local emulator, in a live deployment: what goes upstream (exact amounts, the
idempotency key, the channel code, the expiry), and what a timeout, a 5xx or a refusal on create leaves behind."""

import json
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from apps.channels.amounts import major_units, minor_units
from apps.channels.base import UpstreamUnavailable
from apps.channels.models import UpstreamPayin
from apps.collection.models import CollectionOrder
from apps.payout.models import Payout
from apps.payout.services import payout_submit
from tests.collection.conftest import create_ok as pay_create_ok
from tests.payout.conftest import PHP_FEE, balances, fund
from tests.payout.conftest import create_ok as payout_create_ok

pytestmark = pytest.mark.django_db

FUNDS = 10_000_000


def posted(emulator, path: str) -> list[tuple[dict, bytes]]:
    return [(headers, raw) for method, p, headers, raw in emulator.requests if method == "POST" and p == path]


@pytest.mark.parametrize(("minor", "unit", "wire"), [(150000, 2, "1500.00"), (12345, 2, "123.45"), (1, 2, "0.01"),
                                                     (5000, 0, "5000"), (1234, 3, "1.234")])
def test_amounts_go_on_the_wire_exactly_and_come_back_as_the_same_integer(minor, unit, wire):
    assert format(major_units(minor, unit), "f") == wire
    assert minor_units(json.loads(wire, parse_float=Decimal), unit) == minor
    with pytest.raises(ValueError):
        minor_units(Decimal(wire) + Decimal("0.0001"), unit)


# --- pay-in -------------------------------------------------------------------------------------------------


def test_pay_url_forwards_the_payer_to_one_invoice_with_the_exact_amount_and_the_order_expiry(xendit_channels, merchant,
                                                                                             xendit_emulator):
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=150000, expire_seconds=900)
    assert order.channel == xendit_channels["payin"]
    first = Client().get(f"/pay/{order.pay_token}")
    assert first.status_code == 302
    [invoice] = xendit_emulator.invoice_by_external_id(order.platform_order_no)
    assert first["Location"] == invoice["invoice_url"]
    [(headers, raw)] = posted(xendit_emulator, "/v2/invoices")
    assert b'"amount": 1500.00' in raw  # a decimal number, not a float's rounding and not minor units
    assert (invoice["currency"], invoice["external_id"]) == ("PHP", order.platform_order_no)
    assert 880 <= json.loads(raw)["invoice_duration"] <= 900  # expires with the order ...
    expires_in = datetime.fromisoformat(invoice["expiry_date"].replace("Z", "+00:00")) - timezone.now()
    assert timedelta(seconds=870) <= expires_in <= timedelta(seconds=900)  # ... as Xendit's expiry_date says
    # Opened again: the same invoice, nothing new upstream; the payer's browser lands on Xendit's page.
    assert Client().get(f"/pay/{order.pay_token}")["Location"] == invoice["invoice_url"]
    assert len(xendit_emulator.invoices) == 1
    assert UpstreamPayin.objects.get(platform_order_no=order.platform_order_no).reference == invoice["id"]


def test_the_task_after_pay_create_opens_the_invoice_the_page_then_forwards_to(xendit_channels, merchant,
                                                                              xendit_emulator):
    from apps.collection.tasks import open_upstream_payin

    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=150000)
    reference = open_upstream_payin(order.platform_order_no)
    [invoice] = xendit_emulator.invoice_by_external_id(order.platform_order_no)
    assert reference == invoice["id"] and open_upstream_payin(order.platform_order_no) == reference
    assert Client().get(f"/pay/{order.pay_token}")["Location"] == invoice["invoice_url"]
    assert len(xendit_emulator.invoices) == 1
    # an order no longer payable opens nothing; an upstream that does not answer leaves it to the page
    other = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=150000)
    xendit_emulator.fail_next("invoices", "5xx")
    assert open_upstream_payin(other.platform_order_no) is None
    CollectionOrder.objects.filter(pk=other.pk).update(expire_at=timezone.now() - timedelta(seconds=1))
    assert open_upstream_payin(other.platform_order_no) is None
    assert not xendit_emulator.invoice_by_external_id(other.platform_order_no)


def test_sandbox_order_is_not_dispatched_upstream(merchant, django_capture_on_commit_callbacks, monkeypatch):
    from apps.collection import tasks

    sent = []
    monkeypatch.setattr(tasks.open_upstream_payin, "delay", lambda number: sent.append(number))
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=150000)
    # Decided at create from the routed channel: nothing is even registered to run after commit (docs/performance.md,
    # "Measured changes").
    assert callbacks == [] and sent == []


def test_xendit_order_is_dispatched_upstream_after_commit(xendit_channels, merchant,
                                                          django_capture_on_commit_callbacks, monkeypatch):
    from apps.collection import tasks

    sent = []
    monkeypatch.setattr(tasks.open_upstream_payin, "delay", lambda number: sent.append(number))
    with django_capture_on_commit_callbacks(execute=True):
        order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=150000)
    assert sent == [order.platform_order_no]


@pytest.mark.parametrize("fault", ["5xx", "timeout"])
def test_invoice_create_failure_shows_unavailable_and_the_next_opening_forwards(fault, xendit_channels, merchant,
                                                                               xendit_emulator):
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=20000)
    xendit_emulator.fail_next("invoices", fault)
    page = Client().get(f"/pay/{order.pay_token}")
    assert page.status_code == 503
    assert b'data-testid="unavailable"' in page.content and b"sandbox-banner" not in page.content
    assert not UpstreamPayin.objects.exists()
    again = Client().get(f"/pay/{order.pay_token}")
    assert again.status_code == 302
    order.refresh_from_db()
    assert order.status == "CREATED"
    opened = UpstreamPayin.objects.get(platform_order_no=order.platform_order_no)
    assert again["Location"] == opened.redirect_url
    # a timeout's invoice exists upstream and is the one reused; a 5xx created none
    assert [i["id"] for i in xendit_emulator.invoice_by_external_id(order.platform_order_no)] == [opened.reference]


# --- payout -------------------------------------------------------------------------------------------------


def a_submitted_payout(merchant, emulator, **params) -> Payout:
    fund(merchant, FUNDS)
    payout = payout_create_ok(Client(), merchant, **{"amount": 150000, "bank_code": "GCASH",
                                                     "payee_account": "09171234567", **params})
    return payout


def test_payout_goes_upstream_with_the_order_number_as_idempotency_key(xendit_channels, merchant, xendit_emulator):
    payout = a_submitted_payout(merchant, xendit_emulator)
    assert payout.channel == xendit_channels["payout"]
    submitted = payout_submit(payout_id=payout.pk)
    [upstream] = xendit_emulator.payouts.values()
    [(headers, raw)] = posted(xendit_emulator, "/v2/payouts")
    assert headers["Idempotency-key"] == payout.platform_order_no
    body = json.loads(raw, parse_float=Decimal)
    assert body["amount"] == Decimal("1500.00") and b'"amount": 1500.00' in raw
    assert (body["reference_id"], body["channel_code"], body["currency"]) == (payout.platform_order_no, "PH_GCASH", "PHP")
    assert body["channel_properties"] == {"account_holder_name": "Juan dela Cruz", "account_number": "09171234567"}
    assert submitted.upstream_reference == upstream["id"]
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", upstream["id"])
    assert balances(merchant) == {"available": FUNDS - 150000 - PHP_FEE, "settling": 0, "frozen": 150000 + PHP_FEE}


@pytest.mark.parametrize("reused_key", ["replay", "409"])
@pytest.mark.parametrize("fault", ["timeout", "5xx"])
def test_create_lost_to_timeout_or_5xx_is_resubmitted_with_the_same_key_and_disbursed_once(
        fault, reused_key, xendit_channels, merchant, xendit_emulator):
    xendit_emulator.reused_key = reused_key
    payout = a_submitted_payout(merchant, xendit_emulator)
    xendit_emulator.fail_next("payouts", fault)
    with pytest.raises(UpstreamUnavailable):
        payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", "")  # not lost: the sweeper's to resend
    assert len(xendit_emulator.payouts_by_reference(payout.platform_order_no)) == (1 if fault == "timeout" else 0)
    # Within RESUBMIT_AFTER nothing is sent again ...
    payout_submit(payout_id=payout.pk)
    assert len(posted(xendit_emulator, "/v2/payouts")) == 1
    # ... after it, the sweeper's resubmission: same Idempotency-key and body; Xendit answers the first attempt's
    # payout again (as documented), or an upstream refusing every reuse answers 409 and the lookup finds it.
    Payout.objects.filter(pk=payout.pk).update(submitted_at=timezone.now() - timedelta(minutes=5))
    payout_submit(payout_id=payout.pk)
    [upstream] = xendit_emulator.payouts_by_reference(payout.platform_order_no)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", upstream["id"])
    keys = [headers["Idempotency-key"] for headers, _ in posted(xendit_emulator, "/v2/payouts")]
    assert keys == [payout.platform_order_no] * 2
    assert balances(merchant)["frozen"] == 150000 + PHP_FEE  # frozen once, nothing paid twice


@pytest.mark.parametrize("refusal", ["429", "400"])
def test_resubmission_refused_after_a_lost_answer_keeps_the_first_disbursement_and_fails_nothing(
        refusal, xendit_channels, merchant, xendit_emulator, live_server):
    payout = a_submitted_payout(merchant, xendit_emulator)
    xendit_emulator.fail_next("payouts", "timeout", refusal)  # the first reached Xendit, its answer was lost
    with pytest.raises(UpstreamUnavailable):
        payout_submit(payout_id=payout.pk)
    [upstream] = xendit_emulator.payouts_by_reference(payout.platform_order_no)
    Payout.objects.filter(pk=payout.pk).update(submitted_at=timezone.now() - timedelta(minutes=5))
    if refusal == "429":  # a moment's refusal: not the order's; the next resubmission goes through
        with pytest.raises(UpstreamUnavailable, match="429"):
            payout_submit(payout_id=payout.pk)
        payout_submit(payout_id=payout.pk)
    else:  # a refusal of the retry: Xendit has a payout of our reference_id, so the order is not failed; but a
        # refusal proves no key, so it is not taken for ours either (it might be someone else's) ...
        with pytest.raises(UpstreamUnavailable, match="none bound to its idempotency key"):
            payout_submit(payout_id=payout.pk)
        payout.refresh_from_db()
        assert (payout.status, payout.upstream_reference) == ("PROCESSING", "")
        # ... until the next re-submission with the same key and body is answered with the first attempt's payout,
        # which binds it
        Payout.objects.filter(pk=payout.pk).update(submitted_at=timezone.now() - timedelta(minutes=5))
        payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", upstream["id"])
    assert balances(merchant) == {"available": FUNDS - 150000 - PHP_FEE, "settling": 0, "frozen": 150000 + PHP_FEE}
    # Xendit pays the first submission: the merchant is debited once, never refunded for money that left
    xendit_emulator.settle_payout(upstream["id"], "SUCCEEDED")
    webhook = f"{live_server.url}/channels/xendit/{xendit_channels['payout'].code}/webhook"
    assert xendit_emulator.payout_webhook("payout.succeeded", upstream["id"], webhook).json()["changed"] == "succeeded"
    assert balances(merchant) == {"available": FUNDS - 150000 - PHP_FEE, "settling": 0, "frozen": 0}
    assert len(xendit_emulator.payouts) == 1


def test_payout_refused_on_create_fails_and_the_funds_come_back(xendit_channels, merchant, xendit_emulator):
    payout = a_submitted_payout(merchant, xendit_emulator)
    xendit_emulator.fail_next("payouts", "400")
    payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert (payout.status, payout.fail_reason) == ("FAILED", "refused upstream: INVALID_DESTINATION")
    assert balances(merchant) == {"available": FUNDS, "settling": 0, "frozen": 0}
    assert not xendit_emulator.payouts


def test_wrong_secret_key_fails_no_payout_and_the_resubmission_after_the_fix_disburses(xendit_channels, merchant,
                                                                                     xendit_emulator):
    from apps.channels.services import channel_credentials_set

    channel_credentials_set(channel=xendit_channels["payout"], secret_key="xnd_wrong")
    payout = a_submitted_payout(merchant, xendit_emulator)
    with pytest.raises(UpstreamUnavailable, match="401"):
        payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", "")  # a configuration error fails no order
    assert not xendit_emulator.payouts
    channel_credentials_set(channel=xendit_channels["payout"], secret_key=xendit_emulator.secret_key)
    Payout.objects.filter(pk=payout.pk).update(submitted_at=timezone.now() - timedelta(minutes=5))
    payout_submit(payout_id=payout.pk)
    assert len(xendit_emulator.payouts_by_reference(payout.platform_order_no)) == 1


def test_duplicate_key_answer_never_adopts_a_foreign_payout_with_our_order_number(xendit_channels, merchant,
                                                                                 xendit_emulator):
    xendit_emulator.reused_key = "409"  # an upstream that refuses every reused key: the adapter looks it up
    payout = a_submitted_payout(merchant, xendit_emulator)
    xendit_emulator.fail_next("payouts", "timeout")  # ours created, the answer lost ...
    with pytest.raises(UpstreamUnavailable):
        payout_submit(payout_id=payout.pk)
    [ours] = xendit_emulator.payouts_by_reference(payout.platform_order_no)
    hidden = xendit_emulator.payouts.pop(ours["id"])  # ... and not yet listed by reference_id (Xendit's list lags)
    foreign = xendit_emulator._payout_create(
        {"reference_id": payout.platform_order_no, "channel_code": "PH_BDO", "amount": 3, "currency": "PHP",
         "channel_properties": {"account_number": "1", "account_holder_name": "X"}}, {"Idempotency-key": "other"})[1]
    Payout.objects.filter(pk=payout.pk).update(submitted_at=timezone.now() - timedelta(minutes=5))
    with pytest.raises(UpstreamUnavailable, match="not found by reference_id"):  # 409, and ours not listed: retry
        payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", "")
    xendit_emulator.payouts[hidden["id"]] = hidden  # listed now: the next resubmission finds ours, not the other
    Payout.objects.filter(pk=payout.pk).update(submitted_at=timezone.now() - timedelta(minutes=5))
    payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert payout.upstream_reference == hidden["id"] != foreign["id"]
