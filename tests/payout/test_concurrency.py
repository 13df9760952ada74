"""Concurrent creates on PostgreSQL with real threads: the locked freeze decides who gets the money."""


import pytest

from apps.ledger.models import Hold
from apps.ledger.selectors import ledger_verify
from apps.payout.models import Payout
from tests.helpers import signed_posts_at_once
from tests.payout.conftest import CREATE, PHP_FEE, balances, fund, payout_params

pytestmark = pytest.mark.django_db(transaction=True)


def test_thirty_concurrent_creates_against_balance_for_ten_make_exactly_ten(merchant):
    fund(merchant, 10 * (10_000 + PHP_FEE))
    results = signed_posts_at_once(merchant, CREATE, [payout_params(amount=10_000) for _ in range(30)])
    outcomes = sorted((status, body["code"]) for status, body in results)
    assert outcomes == [(200, "0")] * 10 + [(422, "2003")] * 20
    assert Payout.objects.filter(merchant=merchant.merchant).count() == 10
    assert Hold.objects.filter(merchant=merchant.merchant).count() == 10
    assert balances(merchant) == {"available": 0, "settling": 0, "frozen": 10 * (10_000 + PHP_FEE)}
    assert ledger_verify()["ok"]


def test_concurrent_identical_creates_make_one_order_and_one_freeze(merchant):
    fund(merchant, 1_000_000)
    params = payout_params(mch_order_no="RACE-SAME")
    results = signed_posts_at_once(merchant, CREATE, [params] * 10)
    assert {(status, body["code"]) for status, body in results} == {(200, "0")}
    assert len({body["data"]["platform_order_no"] for _, body in results}) == 1
    assert Hold.objects.filter(merchant=merchant.merchant).count() == 1
    assert balances(merchant)["frozen"] == 10_000 + PHP_FEE


def test_concurrent_creates_with_one_number_and_different_params_make_one_order(merchant):
    fund(merchant, 1_000_000)
    results = signed_posts_at_once(merchant, CREATE, [payout_params(mch_order_no="RACE-DIFF", amount=10_000 + i)
                                          for i in range(8)])
    assert sorted((status, body["code"]) for status, body in results) == [(200, "0")] + [(409, "2001")] * 7
    payout = Payout.objects.get(merchant=merchant.merchant, mch_order_no="RACE-DIFF")
    assert balances(merchant)["frozen"] == payout.amount + payout.fee


def test_concurrent_creates_to_one_payee_account_approve_exactly_the_velocity_limit(merchant, settings):
    """Each create's risk read runs after the locks the earlier creates held, so none misses another."""
    assert settings.PAYOUT_VELOCITY_LIMIT == 5
    fund(merchant, 1_000_000)
    results = signed_posts_at_once(merchant, CREATE, [payout_params(payee_account="0055550001") for _ in range(12)])
    assert {(status, body["code"]) for status, body in results} == {(200, "0")}
    statuses = sorted(body["data"]["status"] for _, body in results)
    assert statuses == ["APPROVED"] * 5 + ["FROZEN"] * 7
    frozen = Payout.objects.filter(payee_account="0055550001", status="FROZEN").order_by("id")
    assert [p.risk_reasons[0].split(" to ")[0] for p in frozen] == [f"Payout number {n}" for n in range(6, 13)]
