"""What an upstream says is decided under the order's row lock and reported once, and
before our upstream reference is known only the disbursement bound to our idempotency key counts. Against the
Xendit emulator (a real HTTP server) and the live server, real threads on PostgreSQL."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from apps.channels.base import UpstreamUnavailable
from apps.ledger.models import Posting
from apps.payout.models import Payout
from apps.payout.services import payout_submit
from apps.payout.upstream import payout_upstream_reconcile
from tests.channels.conftest import PAYIN_CODE, PAYOUT_CODE
from tests.channels.test_xendit_webhooks import AMOUNT, opened_invoice, submitted_payout, url
from tests.helpers import at_once
from tests.payout.conftest import PHP_FEE, balances, fund
from tests.payout.conftest import create_ok as payout_create_ok

pytestmark = pytest.mark.django_db(transaction=True)

WEBHOOKS = 12


def _changes(replies) -> list:
    assert [exc for _, exc in replies] == [None] * len(replies), replies
    assert {response.status_code for response, _ in replies} == {200}
    return [response.json()["changed"] for response, _ in replies]


def test_twelve_concurrent_paid_payout_webhooks_report_the_change_once(xendit_channels, merchant, xendit_emulator,
                                                                       live_server, settings):
    settings.CHANNEL_HTTP_TIMEOUT_SECONDS = 10  # twelve re-reads at once on a busy host: none may give up (503)
    payout, reference = submitted_payout(merchant, xendit_emulator)
    xendit_emulator.settle_payout(reference, "SUCCEEDED")
    changes = _changes(at_once(lambda _: xendit_emulator.payout_webhook(
        "payout.succeeded", reference, url(live_server, PAYOUT_CODE)), WEBHOOKS))
    assert sorted(changes, key=str) == [None] * (WEBHOOKS - 1) + ["succeeded"]
    payout.refresh_from_db()
    assert payout.status == "SUCCESS"
    assert Posting.objects.filter(kind="hold.settle", cause=payout.platform_order_no).count() == 1


def test_twelve_concurrent_paid_invoice_webhooks_report_the_change_once(xendit_channels, merchant, xendit_emulator,
                                                                        live_server, settings):
    settings.CHANNEL_HTTP_TIMEOUT_SECONDS = 10
    order, invoice = opened_invoice(merchant, xendit_emulator)
    xendit_emulator.pay_invoice(invoice["id"])
    changes = _changes(at_once(lambda _: xendit_emulator.invoice_webhook(
        invoice["id"], url(live_server, PAYIN_CODE)), WEBHOOKS))
    assert sorted(changes, key=str) == [None] * (WEBHOOKS - 1) + ["paid"]
    order.refresh_from_db()
    assert order.status == "SUCCESS"
    assert Posting.objects.filter(cause=order.platform_order_no).count() == 1


# --- a foreign disbursement carrying our reference_id ---------------------------------------------------------


def _answer_lost_and_a_foreign_failure(merchant, emulator) -> tuple[Payout, dict]:
    """Our create reached Xendit but its answer was lost (no reference stored); then someone able to create payouts
    on the account makes one with our reference_id, amount and currency, and it fails."""
    fund(merchant, 10_000_000)
    payout = payout_create_ok(Client(), merchant, amount=AMOUNT, bank_code="GCASH", payee_account="09171234567")
    emulator.fail_next("payouts", "timeout")
    with pytest.raises(UpstreamUnavailable):
        payout_submit(payout_id=payout.pk)
    [ours] = emulator.payouts_by_reference(payout.platform_order_no)
    foreign = emulator._payout_create(
        {"reference_id": payout.platform_order_no, "channel_code": "PH_GCASH", "amount": ours["amount"],
         "currency": "PHP", "channel_properties": {"account_number": "000111", "account_holder_name": "Mallory"}},
        {"Idempotency-key": "someone-else"})[1]
    emulator.settle_payout(foreign["id"], "FAILED", failure_code="INVALID_DESTINATION")
    return payout, foreign


def _resubmitted(payout: Payout) -> None:
    """The sweeper's re-submission after RESUBMIT_AFTER, with the same Idempotency-key."""
    Payout.objects.filter(pk=payout.pk).update(submitted_at=timezone.now() - timedelta(minutes=5))
    payout_submit(payout_id=payout.pk)


def test_a_foreign_failed_disbursement_neither_fails_our_payout_nor_releases_its_hold(
        xendit_channels, merchant, xendit_emulator, live_server, settings, caplog):
    xendit_emulator.reused_key = "409"  # the harder upstream: every reused key refused, nothing bound by the answer
    payout, foreign = _answer_lost_and_a_foreign_failure(merchant, xendit_emulator)
    frozen = balances(merchant)["frozen"]
    reply = xendit_emulator.payout_webhook("payout.failed", foreign["id"], url(live_server, PAYOUT_CODE))
    assert (reply.status_code, reply.json()["changed"]) == (200, None)
    Payout.objects.filter(pk=payout.pk).update(submitted_at=timezone.now() - timedelta(
        seconds=settings.CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS + 1))
    assert payout_upstream_reconcile(now=timezone.now())[0]["failed"] == []
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", "")
    assert balances(merchant)["frozen"] == frozen == AMOUNT + PHP_FEE
    assert foreign["id"] in caplog.text and "not applied" in caplog.text
    # Xendit answers the re-sent key with 409 here: two disbursements of our reference_id, amount and currency, and
    # no key to tell which: neither is taken for ours; the order waits, funds frozen, an operator is told.
    with pytest.raises(UpstreamUnavailable):
        _resubmitted(payout)
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", "")
    assert "none is taken for ours" in caplog.text


def test_the_disbursement_our_key_created_is_bound_and_settles_our_payout_despite_a_foreign_one(
        xendit_channels, merchant, xendit_emulator, live_server):
    assert xendit_emulator.reused_key == "replay"  # as Xendit documents it: same key and body → the first payout
    payout, foreign = _answer_lost_and_a_foreign_failure(merchant, xendit_emulator)
    [ours] = [p for p in xendit_emulator.payouts_by_reference(payout.platform_order_no) if p["id"] != foreign["id"]]
    _resubmitted(payout)
    payout.refresh_from_db()
    assert payout.upstream_reference == ours["id"]
    assert xendit_emulator.payout_webhook("payout.failed", foreign["id"],
                                          url(live_server, PAYOUT_CODE)).json()["changed"] is None
    xendit_emulator.settle_payout(ours["id"], "SUCCEEDED")
    assert xendit_emulator.payout_webhook("payout.succeeded", ours["id"],
                                          url(live_server, PAYOUT_CODE)).json()["changed"] == "succeeded"
    payout.refresh_from_db()
    assert payout.status == "SUCCESS" and balances(merchant)["frozen"] == 0
    assert len(xendit_emulator.payouts) == 2  # ours once, and the foreign one
