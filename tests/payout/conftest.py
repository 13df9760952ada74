import itertools

import pytest

from apps.ledger.models import Posting
from apps.ledger.selectors import merchant_balances
from apps.ledger.services import balance_adjust
from apps.payout.models import Payout
from tests.helpers import signed_post

CREATE = "/openapi/v1/payout/create"
QUERY = "/openapi/v1/payout/query"
PHP_FEE = 1000  # PHP_PAYOUT: fee_fixed 10.00 PHP, no rate
PHP_THRESHOLD = 5_000_000  # default review threshold: 50,000.00 PHP
FUNDED = 100_000_000  # what the `funded` merchant starts with
_numbers = itertools.count(1)


def payout_params(**overrides) -> dict:
    params = {"mch_order_no": f"PO-{next(_numbers)}", "product_code": "PHP_PAYOUT", "amount": 10000,
              "currency": "PHP", "payee_name": "Juan dela Cruz", "payee_account": "0012345678", "bank_code": "BDO"}
    params.update(overrides)
    return {k: v for k, v in params.items() if v is not None}


def create(client, ctx, **overrides) -> tuple[int, dict]:
    return signed_post(client, ctx, CREATE, payout_params(**overrides))


def create_ok(client, ctx, **overrides) -> Payout:
    status, body = create(client, ctx, **overrides)
    assert (status, body["code"]) == (200, "0"), body
    return Payout.objects.get(platform_order_no=body["data"]["platform_order_no"])


def query(client, ctx, **numbers) -> tuple[int, dict]:
    return signed_post(client, ctx, QUERY, numbers)


def fund(ctx, amount: int, currency: str = "PHP") -> None:
    balance_adjust(merchant_no=ctx.merchant_no, currency=currency, amount=amount, reason="test top-up")


def balances(ctx, currency: str = "PHP") -> dict:
    return merchant_balances(merchant_id=ctx.merchant.pk, currency=currency)


def money_snapshot(ctx, currency: str = "PHP") -> tuple:
    """Balances and the number of postings: equal before and after means nothing moved."""
    return balances(ctx, currency), Posting.objects.count()


@pytest.fixture
def funded(merchant):
    fund(merchant, FUNDED)
    return merchant


@pytest.fixture
def adapter_calls(monkeypatch):
    """The sandbox adapter records what it was sent instead of scheduling its Celery settlement."""
    from apps.channels.sandbox_payout import SandboxPayoutAdapter

    calls = []

    def start_disbursement(self, *, payout):
        calls.append((payout.platform_order_no, payout.payee_account))
        return f"REF-{payout.platform_order_no}"

    monkeypatch.setattr(SandboxPayoutAdapter, "start_disbursement", start_disbursement)
    return calls


def new_payout(ctx, **overrides) -> Payout:
    from apps.payout.services import payout_create

    return payout_create(merchant=ctx.merchant, **payout_params(**overrides))


def payout_in(ctx, status: str, **overrides) -> Payout:
    """A payout driven through the services to `status` (needs adapter_calls for PROCESSING and later)."""
    from apps.payout import services

    if status in ("FROZEN", "REJECTED"):
        overrides.setdefault("amount", PHP_THRESHOLD)
    payout = new_payout(ctx, **overrides)
    if status == "REJECTED":
        services.payout_reject(payout_id=payout.pk, reviewer=None, reason="test", via="test")
    if status in ("PROCESSING", "SUCCESS", "FAILED"):
        services.payout_submit(payout_id=payout.pk)
    if status in ("SUCCESS", "FAILED"):
        services.payout_channel_result(platform_order_no=payout.platform_order_no,
                                       outcome="paid" if status == "SUCCESS" else "failed", fail_reason="test")
    payout.refresh_from_db()
    assert payout.status == status
    return payout


def staff_user(username: str, *groups: str):
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user(username, password="pw-for-tests-1", is_staff=True)
    user.groups.add(*Group.objects.filter(name__in=groups))
    return user


@pytest.fixture
def reviewer(db):
    return staff_user("rita", "Risk reviewer")


@pytest.fixture
def ops_user(db):
    return staff_user("otto", "Payout operations")
