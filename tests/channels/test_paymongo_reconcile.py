"""reconcile_channels with PayMongo: what a lost webhook left open is resolved by asking PayMongo's API (the
transfer by its id, the checkout session by its id), through the same services as the webhooks; the ledger checks."""

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from apps.channels.models import UpstreamPayin
from apps.collection.models import CollectionOrder
from apps.ledger.models import Posting
from apps.ledger.selectors import ledger_verify
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
    [line] = out.getvalue().splitlines()
    return json.loads(line)


def stale(payout: Payout, settings) -> None:
    Payout.objects.filter(pk=payout.pk).update(
        submitted_at=timezone.now() - timedelta(seconds=settings.CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS + 1))


def submitted(merchant, **params) -> Payout:
    fund(merchant, FUNDS)
    payout = payout_create_ok(Client(), merchant, amount=150000, bank_code="BPI", **params)
    payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    return payout


def test_lost_transfer_answers_are_repaired_once_stale(paymongo_channels, merchant, paymongo_emulator, settings):
    paid, failed, pending = (submitted(merchant, payee_account=account) for account in ("001", "002", "003"))
    paymongo_emulator.settle_transfer(paid.upstream_reference, "succeeded")
    paymongo_emulator.settle_transfer(failed.upstream_reference, "failed", failure_code="account_closed")
    assert reconcile() == NOTHING  # not PROCESSING long enough yet
    for payout in (paid, failed, pending):
        stale(payout, settings)
    result = reconcile()
    assert result["payouts"] == {"checked": 3, "succeeded": [paid.platform_order_no],
                                 "failed": [failed.platform_order_no], "reversed": []}
    assert reconcile()["payouts"]["checked"] == 1  # the pending one is asked again; the others are final
    paid.refresh_from_db(), failed.refresh_from_db()
    assert (paid.status, failed.status, failed.fail_reason) == ("SUCCESS", "FAILED", "account_closed")
    # paid: debited; failed: funds back; pending: still frozen
    assert balances(merchant) == {"available": 3 * FUNDS - 2 * (150000 + PHP_FEE), "settling": 0,
                                  "frozen": 150000 + PHP_FEE}
    assert ledger_verify()["ok"]


def test_paymongo_down_is_reported_and_changes_nothing(paymongo_channels, merchant, paymongo_emulator, settings):
    payout = submitted(merchant)
    paymongo_emulator.settle_transfer(payout.upstream_reference, "succeeded")
    stale(payout, settings)
    paymongo_emulator.outage(True)
    result = reconcile()
    assert [e["platform_order_no"] for e in result["errors"]] == [payout.platform_order_no]
    payout.refresh_from_db()
    assert payout.status == "PROCESSING"
    paymongo_emulator.outage(False)
    assert reconcile()["payouts"]["succeeded"] == [payout.platform_order_no]


def test_lost_checkout_paid_webhook_is_honoured_after_expiry_and_an_unpaid_session_is_closed(
        paymongo_channels, merchant, paymongo_emulator):
    paid = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=150000, expire_seconds=60)
    unpaid = pay_create_ok(Client(), merchant, product_code="PHP_COLLECT_D0", amount=150000, expire_seconds=60)
    for order in (paid, unpaid):
        Client().get(f"/pay/{order.pay_token}")
    [session] = paymongo_emulator.sessions_by_reference(paid.platform_order_no)
    [open_session] = paymongo_emulator.sessions_by_reference(unpaid.platform_order_no)
    paymongo_emulator.pay_session(session["id"])  # ... and the webhook never comes
    assert reconcile() == NOTHING  # not past expiry yet
    CollectionOrder.objects.filter(pk__in=[paid.pk, unpaid.pk]).update(
        expire_at=timezone.now() - timedelta(seconds=1))
    result = reconcile()
    assert result["payins"] == {"checked": 2, "paid": [paid.platform_order_no], "expired": [unpaid.platform_order_no]}
    paid.refresh_from_db(), unpaid.refresh_from_db()
    assert (paid.status, paid.upstream_reference, unpaid.status) == ("SUCCESS", session["id"], "EXPIRED")
    assert paymongo_emulator.sessions[open_session["id"]]["attributes"]["status"] == "expired"  # no one pays it now
    assert Posting.objects.filter(cause=paid.platform_order_no).count() == 1
    assert set(UpstreamPayin.objects.values_list("upstream_status", flat=True)) == {"PAID", "EXPIRED"}
    requests_before = len(paymongo_emulator.requests)
    assert reconcile() == NOTHING and len(paymongo_emulator.requests) == requests_before  # final: not asked again
    assert ledger_verify()["ok"]
