"""Sandbox payouts end to end (docs/api.md, "Sandbox channel"): real Celery worker, real signed callbacks to a local
HTTP server.

Time bounds of the contract ("settles within 5 s of approval", "returned within 10 s of SUCCESS") are measured on
the order's own timestamps; the tests wait for the event itself with the suite's generous timeout, so a loaded
machine makes them slower, not flaky."""

import pytest
from django.test import Client

from apps.channels.models import SandboxDisbursement
from apps.ledger.selectors import ledger_verify
from apps.payout import services
from apps.payout.models import Payout
from tests.callbacks.merchant_side import merchant_verifies
from tests.conftest import make_merchant
from tests.payout.conftest import PHP_FEE, PHP_THRESHOLD, balances, create, fund, query
from tests.support.wait import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

FUNDS = 1_000_000


@pytest.fixture
def shop(bootstrapped, rsa_keys, callback_receiver, live_celery_worker):
    ctx = make_merchant(rsa_keys[2], name="Sandbox Shop", payout_callback_url=callback_receiver.url)
    fund(ctx, FUNDS)
    return ctx


def payout_status(platform_order_no: str) -> Payout:
    return Payout.objects.get(platform_order_no=platform_order_no)


def callbacks_for(receiver, platform_order_no: str) -> list[dict]:
    return [r.body for r in receiver.requests if r.body and r.body.get("platform_order_no") == platform_order_no]


def reached(platform_order_no: str, status: str) -> Payout:
    return wait_until(lambda: (p := payout_status(platform_order_no)).status == status and p,
                      what=f"payout {platform_order_no} {status}")


def callbacks_arrived(receiver, platform_order_no: str, count: int) -> list[dict]:
    return wait_until(lambda: len(found := callbacks_for(receiver, platform_order_no)) >= count and found,
                      what=f"{count} callback(s) of {platform_order_no}")


def test_sandbox_payout_succeeds_within_5s_and_merchant_gets_signed_success_callback(shop, callback_receiver):
    status, body = create(Client(), shop, amount=25_000, payee_account="0012345678")
    assert (status, body["data"]["status"]) == (200, "APPROVED")
    number = body["data"]["platform_order_no"]
    payout = reached(number, "SUCCESS")
    assert (payout.finished_at - payout.created_at).total_seconds() < 5  # approved on creation (docs/api.md, sandbox)
    [callback] = callbacks_arrived(callback_receiver, number, 1)
    assert merchant_verifies(callback)
    assert (callback["status"], callback["amount"], callback["fee"]) == ("SUCCESS", 25_000, PHP_FEE)
    assert "event" not in callback and "finished_at" not in callback
    assert balances(shop) == {"available": FUNDS - 25_000 - PHP_FEE, "settling": 0, "frozen": 0}
    data = query(Client(), shop, platform_order_no=number)[1]["data"]
    assert data["status"] == "SUCCESS" and isinstance(data["finished_at"], int)
    assert ledger_verify()["ok"]


def test_sandbox_account_ending_4000_fails_account_closed_and_funds_come_back(shop, callback_receiver):
    status, body = create(Client(), shop, amount=25_000, payee_account="0055554000")
    number = body["data"]["platform_order_no"]
    payout = reached(number, "FAILED")
    assert payout.fail_reason == "account closed"
    [callback] = callbacks_arrived(callback_receiver, number, 1)
    assert (callback["status"], callback["fail_reason"]) == ("FAILED", "account closed")
    assert merchant_verifies(callback)
    assert balances(shop) == {"available": FUNDS, "settling": 0, "frozen": 0}
    assert query(Client(), shop, platform_order_no=number)[1]["data"]["fail_reason"] == "account closed"


def test_sandbox_account_ending_4001_succeeds_then_is_returned_within_10s(shop, callback_receiver):
    status, body = create(Client(), shop, amount=25_000, payee_account="0055554001")
    number = body["data"]["platform_order_no"]
    payout = wait_until(lambda: (p := payout_status(number)).reversed_at and p, what=f"payout {number} reversed")
    assert payout.status == "SUCCESS"
    assert (payout.reversed_at - payout.finished_at).total_seconds() < 10
    assert (payout.reversal_amount, payout.fee_refund) == (25_000, PHP_FEE)
    success, reversed_ = callbacks_arrived(callback_receiver, number, 2)  # enqueued in this order
    assert success["status"] == "SUCCESS" and "event" not in success
    assert reversed_["event"] == "payout.reversed" and "status" not in reversed_
    assert (reversed_["reversal_amount"], reversed_["fee_refund"], reversed_["amount"]) == (25_000, PHP_FEE, 25_000)
    assert reversed_["reversed_at"] == int(payout.reversed_at.timestamp())
    assert merchant_verifies(success) and merchant_verifies(reversed_)
    assert balances(shop) == {"available": FUNDS, "settling": 0, "frozen": 0}
    data = query(Client(), shop, platform_order_no=number)[1]["data"]
    assert (data["status"], data["reversed_at"]) == ("SUCCESS", reversed_["reversed_at"])
    assert ledger_verify()["ok"]


def test_frozen_payout_settles_within_5s_of_approval(shop, callback_receiver):
    fund(shop, PHP_THRESHOLD)
    status, body = create(Client(), shop, amount=PHP_THRESHOLD, payee_account="0012340000")
    number = body["data"]["platform_order_no"]
    assert (body["data"]["status"], body["data"]["review_required"]) == ("FROZEN", True)
    # Nothing leaves before a reviewer decides: an order created after it goes all the way to SUCCESS (the
    # workers had their chance at both), and the frozen one was never submitted.
    later = create(Client(), shop, amount=25_000, payee_account="0012345678")[1]["data"]["platform_order_no"]
    reached(later, "SUCCESS")
    frozen = payout_status(number)
    assert (frozen.status, frozen.submitted_at) == ("FROZEN", None)
    assert not SandboxDisbursement.objects.filter(platform_order_no=number).exists()

    services.payout_approve(payout_id=frozen.pk, reviewer=None, via="test")
    payout = reached(number, "SUCCESS")
    assert (payout.finished_at - payout.reviewed_at).total_seconds() < 5
    assert [c["status"] for c in callbacks_arrived(callback_receiver, number, 1)] == ["SUCCESS"]


def test_a_settlement_task_that_died_on_a_deadlock_is_finished_by_the_sweeper(shop, callback_receiver, monkeypatch):
    """The sandbox bank's settlement task died (deadlock detected) in a real worker; the payout stayed
    PROCESSING with its reference, funds frozen, no callback. The sweeper finishes it; the worker delivers the
    callback."""
    from datetime import timedelta

    from django.db import OperationalError
    from django.utils import timezone

    from apps.channels import sandbox_payout
    from apps.channels.models import SandboxDisbursement
    from apps.payout.tasks import sweep_stuck_payouts

    died = []

    class Deadlocked:
        def result(self, **kwargs):
            died.append(kwargs["platform_order_no"])
            raise OperationalError("deadlock detected")

    monkeypatch.setattr(sandbox_payout, "payout_handlers", lambda: Deadlocked())
    status, body = create(Client(), shop, amount=25_000, payee_account="0012345678")
    number = body["data"]["platform_order_no"]
    wait_until(lambda: number in died, what="the settlement task to die")
    payout = payout_status(number)
    assert (payout.status, payout.upstream_reference) == ("PROCESSING", f"SBX-{number}")
    assert balances(shop)["frozen"] == 25_000 + PHP_FEE and callbacks_for(callback_receiver, number) == []

    long_ago = timezone.now() - timedelta(minutes=2)  # the sweeper's grace has passed
    Payout.objects.filter(pk=payout.pk).update(submitted_at=long_ago)
    SandboxDisbursement.objects.filter(platform_order_no=number).update(created_at=long_ago)
    sweep_stuck_payouts()

    assert payout_status(number).status == "SUCCESS"
    [callback] = callbacks_arrived(callback_receiver, number, 1)
    assert callback["status"] == "SUCCESS" and merchant_verifies(callback)
    assert balances(shop) == {"available": FUNDS - 25_000 - PHP_FEE, "settling": 0, "frozen": 0}
    assert ledger_verify()["ok"]
