"""reconcile_channels: what a lost webhook left open is resolved by asking the upstream, not by hand; the command
prints what it changed as one JSON object, and a second run changes nothing."""

import json
from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from apps.channels.base import UpstreamUnavailable
from apps.channels.models import UpstreamPayin
from apps.channels.tasks import reconcile_channels
from apps.collection.models import CollectionOrder
from apps.collection.services import collection_expire
from apps.ledger.models import Posting
from apps.payout.models import Payout
from apps.payout.services import payout_submit
from tests.collection.conftest import create_ok as pay_create_ok
from tests.payout.conftest import PHP_FEE, balances, fund
from tests.payout.conftest import create_ok as payout_create_ok

pytestmark = pytest.mark.django_db

FUNDS = 10_000_000
NOTHING = {"payouts": {"checked": 0, "succeeded": [], "failed": [], "reversed": []},
           "payins": {"checked": 0, "paid": [], "expired": []}, "errors": []}


def reconcile() -> dict:
    out = StringIO()
    call_command("reconcile_channels", stdout=out)
    [line] = out.getvalue().splitlines()  # one JSON object
    return json.loads(line)


def stale(payout: Payout, settings) -> None:
    Payout.objects.filter(pk=payout.pk).update(
        submitted_at=timezone.now() - timedelta(seconds=settings.CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS + 1))


def a_payout(merchant, emulator, **params) -> Payout:
    fund(merchant, FUNDS)
    return payout_create_ok(Client(), merchant, amount=150000, bank_code="BDO", **params)


def test_nothing_open_is_nothing_changed(xendit_channels):
    assert reconcile() == NOTHING


def test_lost_payout_success_webhook_is_repaired_once_stale(xendit_channels, merchant, xendit_emulator, settings):
    payout = a_payout(merchant, xendit_emulator)
    payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    xendit_emulator.settle_payout(payout.upstream_reference, "SUCCEEDED")  # ... and the webhook never comes
    assert reconcile() == NOTHING  # not PROCESSING long enough yet
    stale(payout, settings)
    assert reconcile() == {**NOTHING, "payouts": {"checked": 1, "succeeded": [payout.platform_order_no], "failed": [],
                                                  "reversed": []}}
    payout.refresh_from_db()
    assert payout.status == "SUCCESS"
    assert balances(merchant) == {"available": FUNDS - 150000 - PHP_FEE, "settling": 0, "frozen": 0}
    assert reconcile() == NOTHING


def test_lost_failure_and_lost_reversal_are_repaired(xendit_channels, merchant, xendit_emulator, settings):
    failed, reversed_ = a_payout(merchant, xendit_emulator), a_payout(merchant, xendit_emulator,
                                                                       payee_account="0099887766")
    for payout, status in ((failed, "FAILED"), (reversed_, "REVERSED")):
        payout_submit(payout_id=payout.pk)
        payout.refresh_from_db()
        xendit_emulator.settle_payout(payout.upstream_reference, status,
                                      failure_code="REJECTED_BY_CHANNEL" if status == "FAILED" else None)
        stale(payout, settings)
    result = reconcile()
    assert result["payouts"] == {"checked": 2, "succeeded": [], "failed": [failed.platform_order_no],
                                 "reversed": [reversed_.platform_order_no]}
    failed.refresh_from_db(), reversed_.refresh_from_db()
    assert (failed.status, failed.fail_reason) == ("FAILED", "REJECTED_BY_CHANNEL")
    assert reversed_.status == "SUCCESS" and reversed_.reversal_amount == 150000
    assert balances(merchant) == {"available": 2 * FUNDS, "settling": 0, "frozen": 0}


def test_payout_whose_create_answer_was_lost_is_bound_by_its_resubmission_then_reconciled(
        xendit_channels, merchant, xendit_emulator, settings):
    payout = a_payout(merchant, xendit_emulator)
    xendit_emulator.fail_next("payouts", "timeout")
    with pytest.raises(UpstreamUnavailable):
        payout_submit(payout_id=payout.pk)
    [upstream] = xendit_emulator.payouts_by_reference(payout.platform_order_no)
    xendit_emulator.settle_payout(upstream["id"], "SUCCEEDED")
    stale(payout, settings)
    # No reference of ours yet: nothing read back is applied; the sweeper's re-submission (same key) binds it first.
    assert reconcile()["payouts"]["checked"] == 0
    payout_submit(payout_id=payout.pk)
    assert reconcile()["payouts"]["succeeded"] == [payout.platform_order_no]
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("SUCCESS", upstream["id"])
    assert len(xendit_emulator.payouts) == 1


def test_payout_that_never_reached_the_upstream_is_left_to_the_resubmission(xendit_channels, merchant,
                                                                            xendit_emulator, settings):
    payout = a_payout(merchant, xendit_emulator)
    xendit_emulator.fail_next("payouts", "5xx")
    with pytest.raises(UpstreamUnavailable):
        payout_submit(payout_id=payout.pk)
    stale(payout, settings)
    assert reconcile()["payouts"] == {"checked": 0, "succeeded": [], "failed": [], "reversed": []}
    payout.refresh_from_db()
    assert payout.status == "PROCESSING" and not xendit_emulator.payouts


def test_upstream_down_is_reported_and_changes_nothing(xendit_channels, merchant, xendit_emulator, settings):
    payout = a_payout(merchant, xendit_emulator)
    payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    stale(payout, settings)
    xendit_emulator.stop()
    result = reconcile()
    assert [e["platform_order_no"] for e in result["errors"]] == [payout.platform_order_no]
    payout.refresh_from_db()
    assert payout.status == "PROCESSING"


def test_lost_invoice_paid_webhook_is_repaired_after_expiry(xendit_channels, merchant, xendit_emulator):
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=150000, expire_seconds=60)
    Client().get(f"/pay/{order.pay_token}")
    [invoice] = xendit_emulator.invoice_by_external_id(order.platform_order_no)
    xendit_emulator.pay_invoice(invoice["id"])  # ... and the webhook never comes
    assert reconcile() == NOTHING  # not past expiry yet
    CollectionOrder.objects.filter(pk=order.pk).update(expire_at=timezone.now() - timedelta(seconds=1))
    assert collection_expire(order_id=order.pk)  # the expiry task got there first
    assert reconcile()["payins"] == {"checked": 1, "paid": [order.platform_order_no], "expired": []}
    order.refresh_from_db()
    assert (order.status, order.upstream_reference) == ("SUCCESS", invoice["id"])
    assert Posting.objects.filter(cause=order.platform_order_no).count() == 1
    assert UpstreamPayin.objects.get(platform_order_no=order.platform_order_no).upstream_status == "PAID"
    gets = len(xendit_emulator.requests)
    assert reconcile() == NOTHING and len(xendit_emulator.requests) == gets  # final: not asked again


def test_unpaid_invoice_past_expiry_expires_the_order_through_the_periodic_task(xendit_channels, merchant,
                                                                               xendit_emulator):
    order = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=150000, expire_seconds=60)
    Client().get(f"/pay/{order.pay_token}")
    [invoice] = xendit_emulator.invoice_by_external_id(order.platform_order_no)
    xendit_emulator.expire_invoice(invoice["id"])
    CollectionOrder.objects.filter(pk=order.pk).update(expire_at=timezone.now() - timedelta(seconds=1))
    result = reconcile_channels()  # the beat task: the same service
    assert result["payins"] == {"checked": 1, "paid": [], "expired": [order.platform_order_no]}
    order.refresh_from_db()
    assert order.status == "EXPIRED"


def test_beat_runs_the_reconciliation(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["channels-reconcile"]
    assert entry["task"] == reconcile_channels.name


def test_a_foreign_payout_with_our_order_number_is_not_taken_for_ours(xendit_channels, merchant, xendit_emulator,
                                                                      settings):
    # Our create never reached Xendit (5xx); someone else's payout on the account carries our order number.
    payout = a_payout(merchant, xendit_emulator)
    xendit_emulator.fail_next("payouts", "5xx")
    with pytest.raises(UpstreamUnavailable):
        payout_submit(payout_id=payout.pk)
    foreign = xendit_emulator._payout_create(
        {"reference_id": payout.platform_order_no, "channel_code": "PH_BDO", "amount": 3, "currency": "PHP",
         "channel_properties": {"account_number": "1", "account_holder_name": "X"}}, {"Idempotency-key": "other"})[1]
    xendit_emulator.settle_payout(foreign["id"], "SUCCEEDED")
    stale(payout, settings)
    assert reconcile()["payouts"] == {"checked": 0, "succeeded": [], "failed": [], "reversed": []}
    payout.refresh_from_db()
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", "")
    # the sweeper's resubmission (same Idempotency-key, not used before) is then our one disbursement
    Payout.objects.filter(pk=payout.pk).update(submitted_at=timezone.now() - timedelta(minutes=5))
    payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    assert payout.upstream_reference and payout.upstream_reference != foreign["id"]
    assert balances(merchant)["frozen"] == 150000 + PHP_FEE


def test_an_upstream_amount_that_is_no_whole_minor_unit_is_reported_not_a_crash(xendit_channels, merchant,
                                                                                xendit_emulator, settings):
    first, second = a_payout(merchant, xendit_emulator), a_payout(merchant, xendit_emulator, payee_account="0099")
    for payout in (first, second):
        payout_submit(payout_id=payout.pk)
        payout.refresh_from_db()
    xendit_emulator.payouts[first.upstream_reference]["amount"] = Decimal("0.001")  # an answer we cannot read
    xendit_emulator.settle_payout(second.upstream_reference, "SUCCEEDED")
    stale(first, settings), stale(second, settings)
    result = reconcile()  # one odd answer does not stop the run: the other payout is repaired
    assert result["payouts"]["succeeded"] == [second.platform_order_no]
    assert [e["platform_order_no"] for e in result["errors"]] == [first.platform_order_no]
    assert "minor units" in result["errors"][0]["error"]
    first.refresh_from_db()
    assert first.status == "PROCESSING"
    # without our reference (the create's answer lost) reconciliation does not ask: the re-submission binds it first
    Payout.objects.filter(pk=first.pk).update(upstream_reference="")
    assert reconcile()["payouts"] == {"checked": 0, "succeeded": [], "failed": [], "reversed": []}
