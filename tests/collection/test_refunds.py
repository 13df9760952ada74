"""Refunds of paid pay-ins, the money: the hold at create, SUCCESS and FAILED, and every refusal moving nothing
(docs/api.md, "Refunds")."""

import pytest

from apps.collection.models import CollectionOrder, Refund
from apps.collection.refunds import OUTCOME_FAILED, OUTCOME_SUCCEEDED, refund_channel_result, refund_create
from apps.collection.services import collection_notify_paid
from apps.common.errors import DomainError
from apps.ledger.models import Hold, Posting
from tests.collection.conftest import balances, create_ok

pytestmark = pytest.mark.django_db


def paid_order(client, ctx, *, amount=100_000, product_code="PHP_COLLECT_D0", **overrides) -> CollectionOrder:
    order = create_ok(client, ctx, product_code=product_code, amount=amount, **overrides)
    return collection_notify_paid(platform_order_no=order.platform_order_no)


def refused(code: str, **kwargs) -> DomainError:
    with pytest.raises(DomainError) as raised:
        refund_create(**kwargs)
    assert raised.value.error.code == code, raised.value.msg
    return raised.value


def test_a_refund_holds_its_amount_from_available_in_the_transaction_that_creates_it(client, merchant):
    order = paid_order(client, merchant)
    refund = refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-1",
                           amount=30_000, reason="damaged")
    assert refund.status == Refund.Status.PROCESSING
    assert (refund.refunded_total, refund.refundable) == (30_000, 70_000)
    assert refund.refund_no.startswith("R") and refund.refund_no.isalnum()
    assert balances(merchant) == {"available": 70_000, "settling": 0, "frozen": 30_000}
    hold = Hold.objects.get(pk=refund.hold_id)
    assert (hold.amount, hold.cause, hold.status) == (30_000, refund.refund_no, Hold.Status.HELD)


def test_a_successful_refund_leaves_to_the_channel_and_a_failed_one_comes_back(client, merchant):
    order = paid_order(client, merchant)
    paid = refund_create(merchant=merchant.merchant, platform_order_no=order.platform_order_no,
                         mch_refund_no="RF-OK", amount=30_000)
    failed = refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-KO",
                           amount=20_000)
    refund_channel_result(refund_no=paid.refund_no, outcome=OUTCOME_SUCCEEDED)
    refund_channel_result(refund_no=failed.refund_no, outcome=OUTCOME_FAILED, fail_reason="account closed")
    assert balances(merchant) == {"available": 70_000, "settling": 0, "frozen": 0}
    paid.refresh_from_db(), failed.refresh_from_db()
    assert (paid.status, failed.status, failed.fail_reason) == ("SUCCESS", "FAILED", "account closed")
    assert paid.finished_at and failed.finished_at
    assert Posting.objects.get(kind="hold.settle", cause=paid.refund_no).entries.filter(
        account__kind="payin_clearing", amount=30_000).exists()
    # The failed refund gave its amount back: it is refundable again.
    again = refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-3",
                          amount=70_000)
    assert (again.refunded_total, again.refundable) == (100_000, 0)


def test_a_second_answer_on_a_finished_refund_moves_nothing(client, merchant):
    order = paid_order(client, merchant)
    refund = refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-1",
                           amount=1_000)
    refund_channel_result(refund_no=refund.refund_no, outcome=OUTCOME_SUCCEEDED)
    before = (balances(merchant), Posting.objects.count())
    refund_channel_result(refund_no=refund.refund_no, outcome=OUTCOME_FAILED, fail_reason="late")
    refund_channel_result(refund_no=refund.refund_no, outcome=OUTCOME_SUCCEEDED)
    refund.refresh_from_db()
    assert (refund.status, refund.fail_reason) == ("SUCCESS", "")
    assert (balances(merchant), Posting.objects.count()) == before


def test_refunds_of_an_order_never_add_up_to_more_than_was_paid(client, merchant):
    order = paid_order(client, merchant)
    refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-1", amount=60_000)
    before = (balances(merchant), Refund.objects.count(), Posting.objects.count())
    error = refused("2008", merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-2",
                    amount=40_001)
    assert "40000 still refundable" in error.msg
    assert (balances(merchant), Refund.objects.count(), Posting.objects.count()) == before


def test_an_unpaid_order_is_not_refundable_and_nothing_moves(client, merchant):
    order = create_ok(client, merchant, product_code="PHP_COLLECT_D0", amount=10_000)
    paid_order(client, merchant, amount=50_000)  # funds in available, so only the order's state refuses
    before = (balances(merchant), Refund.objects.count(), Posting.objects.count())
    error = refused("2007", merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-1",
                    amount=1_000)
    assert "not paid" in error.msg
    assert (balances(merchant), Refund.objects.count(), Posting.objects.count()) == before


def test_a_refund_never_draws_on_settling(client, merchant):
    """A D1 pay-in's credit is in settling until its release: available is short, so the refund is 2003."""
    order = paid_order(client, merchant, amount=50_000, product_code="PHP_COLLECT_D1")
    assert balances(merchant) == {"available": 0, "settling": 50_000, "frozen": 0}
    before = (Refund.objects.count(), Posting.objects.count())
    refused("2003", merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-1",
            amount=10_000)
    assert balances(merchant) == {"available": 0, "settling": 50_000, "frozen": 0}
    assert (Refund.objects.count(), Posting.objects.count()) == before


def test_another_merchants_order_is_not_found(client, merchant, other_merchant):
    order = paid_order(client, merchant)
    refused("2002", merchant=other_merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-1",
            amount=1_000)
    assert not Refund.objects.exists()


def test_the_same_mch_refund_no_replays_the_refund_or_is_2001(client, merchant):
    order = paid_order(client, merchant)
    first = refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-1",
                          amount=1_000, reason="size")
    refund_channel_result(refund_no=first.refund_no, outcome=OUTCOME_SUCCEEDED)
    before = (balances(merchant), Posting.objects.count())
    again = refund_create(merchant=merchant.merchant, platform_order_no=order.platform_order_no,
                          mch_refund_no="RF-1", amount=1_000, reason="size")
    assert (again.pk, again.status, again.refunded_total) == (first.pk, "SUCCESS", 1_000)
    error = refused("2001", merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-1",
                    amount=2_000, reason="size")
    assert "different amount" in error.msg
    assert (balances(merchant), Posting.objects.count(), Refund.objects.count()) == (*before, 1)


def test_the_sweep_submits_a_refund_whose_submission_was_lost_and_finishes_one_whose_answer_was(client, merchant):
    import time
    from datetime import timedelta

    from django.conf import settings
    from django.utils import timezone

    from apps.collection.refunds import refunds_sweep

    order = paid_order(client, merchant)
    # In this test's transaction nothing is committed: the submission queued on commit never runs.
    refund = refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-LOST",
                           amount=10_000)
    assert refunds_sweep() == {}  # too recent: its submission may still be on the way
    later = timezone.now() + timedelta(minutes=1)
    assert refunds_sweep(now=later) == {"refund.unsubmitted": 1}
    refund.refresh_from_db()
    assert (refund.status, refund.upstream_reference) == ("PROCESSING", f"SBXR{refund.refund_no}")
    time.sleep(settings.SANDBOX_REFUND_SETTLE_SECONDS)  # the sandbox answers this long after the refund was made
    assert refunds_sweep(now=later) == {"refund.unanswered": 1}
    refund.refresh_from_db()
    assert refund.status == "SUCCESS"
    assert balances(merchant) == {"available": 90_000, "settling": 0, "frozen": 0}
    assert refunds_sweep(now=later) == {}


def test_the_statement_shows_each_refunds_hold_release_and_completion_under_its_refund_no(client, merchant):
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from django.conf import settings

    from tests.helpers import assert_ok, signed_post

    order = paid_order(client, merchant, amount=100_000)
    paid = refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-OK",
                         amount=30_000)
    failed = refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-KO",
                           amount=1_099)
    refund_channel_result(refund_no=paid.refund_no, outcome=OUTCOME_SUCCEEDED)
    refund_channel_result(refund_no=failed.refund_no, outcome=OUTCOME_FAILED, fail_reason="sandbox rule")
    today = datetime.now(ZoneInfo(settings.SETTLEMENT_TIME_ZONE)).date().isoformat()
    data = assert_ok(signed_post(client, merchant, "/openapi/v1/statement", {"date": today, "currency": "PHP"}))
    refund_rows = [(m["kind"], m["cause"], m["account"], m["amount"]) for m in data["movements"]
                   if m["cause"] in (paid.refund_no, failed.refund_no)]
    assert refund_rows == [
        ("hold.place", paid.refund_no, "available", -30_000), ("hold.place", paid.refund_no, "frozen", 30_000),
        ("hold.place", failed.refund_no, "available", -1_099), ("hold.place", failed.refund_no, "frozen", 1_099),
        ("hold.settle", paid.refund_no, "frozen", -30_000),
        ("hold.release", failed.refund_no, "frozen", -1_099), ("hold.release", failed.refund_no, "available", 1_099),
    ]
    assert {a["account"]: a["closing"] for a in data["accounts"]} == {"available": 70_000, "settling": 0,
                                                                      "frozen": 0}


def test_a_refund_without_its_answer_is_counted_stuck_and_listed_until_the_sweep_finishes_it(client, merchant,
                                                                                             admin_client):
    import time
    from datetime import timedelta

    from django.conf import settings
    from django.utils import timezone

    from apps.collection.refunds import refunds_sweep
    from apps.operations.selectors import stranded_orders

    order = paid_order(client, merchant)
    refund = refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-STUCK",
                           amount=10_000)

    def stuck(now) -> int:
        return next(figure.count for figure in stranded_orders(now=now) if figure.kind.name == "refund.unanswered")

    assert stuck(timezone.now()) == 0  # its answer may still come
    later = timezone.now() + timedelta(minutes=1)
    assert stuck(later) == 1
    time.sleep(settings.SANDBOX_REFUND_SETTLE_SECONDS)
    refunds_sweep(now=later)  # submits it
    refunds_sweep(now=later)  # asks the sandbox and applies its answer
    refund.refresh_from_db()
    assert refund.status == "SUCCESS" and stuck(later) == 0


def test_a_pay_in_whose_channel_takes_no_refunds_is_2007_naming_the_channel(client, merchant, monkeypatch):
    from apps.channels.sandbox_payin import SandboxPayinAdapter

    order = paid_order(client, merchant)
    monkeypatch.setattr(SandboxPayinAdapter, "takes_refunds", False)
    before = (balances(merchant), Refund.objects.count(), Posting.objects.count())
    error = refused("2007", merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-1",
                    amount=1_000)
    assert f"channel {order.channel.code} does not take refunds" in error.msg
    assert (balances(merchant), Refund.objects.count(), Posting.objects.count()) == before


def test_a_refund_its_channel_refuses_at_submission_fails_and_its_amount_comes_back(client, merchant, monkeypatch):
    from apps.channels.base import UpstreamRejected
    from apps.channels.sandbox_payin import SandboxPayinAdapter
    from apps.collection.refunds import refund_submit

    def refuse(self, *, refund):
        raise UpstreamRejected("the payment is older than the channel's refund window")

    order = paid_order(client, merchant)
    refund = refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-1",
                           amount=10_000)
    monkeypatch.setattr(SandboxPayinAdapter, "start_refund", refuse)
    assert refund_submit(refund_id=refund.pk) is None
    refund.refresh_from_db()
    assert (refund.status, refund.fail_reason) == ("FAILED", "the payment is older than the channel's refund window")
    assert balances(merchant) == {"available": 100_000, "settling": 0, "frozen": 0}
    assert refund_submit(refund_id=refund.pk) is None  # a finished refund is not submitted again


def test_the_sandbox_answers_no_refund_in_a_live_deployment(client, merchant, settings):
    from apps.channels.sandbox_payin import sandbox_refund_settle

    order = paid_order(client, merchant)
    refund = refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="RF-1",
                           amount=10_000)
    settings.PLATFORM_ENVIRONMENT = "live"
    sandbox_refund_settle.run(refund.refund_no, "succeeded")
    refund.refresh_from_db()
    assert refund.status == "PROCESSING"
    assert balances(merchant)["frozen"] == 10_000
