"""Four eyes (docs/back-office.md): each rule, and a try to break it."""

import threading

import pytest
from django.contrib.admin import helpers
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import IntegrityError, close_old_connections, transaction

from apps.common.models import AuditLog, StaffRequest
from apps.common.staff_requests import StaffRequestRefused, staff_request_approve, staff_request_create
from apps.merchants.models import MerchantCurrency
from apps.payout import services
from apps.payout.models import Payout, PayoutApproval
from tests.payout.conftest import PHP_FEE, balances, fund, money_snapshot, new_payout, payout_in, staff_user
from tests.support.staff import admin_login

QUEUE = "/admin/payout/payoutreviewqueue/"
REQUESTS = "/admin/common/staffrequest/"
DUAL = 6_000_000  # 60,000.00 PHP: the two-approval threshold these tests set


def set_dual_threshold(ctx, value: int = DUAL) -> None:
    MerchantCurrency.objects.filter(merchant=ctx.merchant, currency_id="PHP").update(
        payout_dual_approval_threshold=value)


def big_payout(ctx) -> Payout:
    set_dual_threshold(ctx)
    payout = new_payout(ctx, amount=DUAL)
    assert (payout.status, payout.approvals_required) == ("FROZEN", 2)
    return payout


def act(client, url, action, objs, **extra):
    return client.post(url, {"action": action, helpers.ACTION_CHECKBOX_NAME: [o.pk for o in objs], **extra},
                       follow=True)


@pytest.fixture
def reviewers(db):
    return staff_user("rita", "Risk reviewer"), staff_user("rolf", "Risk reviewer")


# --- payouts ------------------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_below_the_two_approval_threshold_one_approval_is_enough(funded, reviewers):
    set_dual_threshold(funded)
    payout = new_payout(funded, amount=DUAL - 1)  # above the review threshold, below the second one
    assert (payout.status, payout.approvals_required) == ("FROZEN", 1)
    done = services.payout_approve(payout_id=payout.pk, reviewer=reviewers[0], reason="known payee")
    assert done.status == "APPROVED"


@pytest.mark.django_db
def test_at_the_threshold_two_different_reviewers_must_approve(funded, reviewers,
                                                                django_capture_on_commit_callbacks):
    rita, rolf = reviewers
    payout = big_payout(funded)
    assert any("two-approval threshold" in reason for reason in payout.risk_reasons)
    before = money_snapshot(funded)
    with django_capture_on_commit_callbacks() as dispatched:
        first = services.payout_approve(payout_id=payout.pk, reviewer=rita, reason="payee verified by phone")
    assert first.status == "FROZEN" and dispatched == []  # one yes moves nothing
    assert AuditLog.objects.get(action="payout.approval").new["approvals"] == "1/2"
    with django_capture_on_commit_callbacks() as dispatched:
        second = services.payout_approve(payout_id=payout.pk, reviewer=rolf, reason="invoice matches")
    assert second.status == "APPROVED" and len(dispatched) == 1
    assert list(payout.approvals.values_list("reviewer__username", "decision")) == [
        ("rita", "APPROVE"), ("rolf", "APPROVE")]
    assert money_snapshot(funded) == before


@pytest.mark.django_db
def test_the_same_reviewer_approving_twice_is_refused(funded, reviewers):
    rita, _ = reviewers
    payout = big_payout(funded)
    services.payout_approve(payout_id=payout.pk, reviewer=rita, reason="first")
    with pytest.raises(services.PayoutActionRefused, match="already decided"):
        services.payout_approve(payout_id=payout.pk, reviewer=rita, reason="second, as myself")
    with pytest.raises(services.PayoutActionRefused, match="already decided"):
        services.payout_reject(payout_id=payout.pk, reviewer=rita, reason="changed my mind")
    assert Payout.objects.get(pk=payout.pk).status == "FROZEN"
    assert payout.approvals.count() == 1


@pytest.mark.django_db
def test_the_database_refuses_a_second_row_for_one_reviewer_and_an_empty_reason(funded, reviewers):
    rita, _ = reviewers
    payout = big_payout(funded)
    PayoutApproval.objects.create(payout=payout, reviewer=rita, actor_label="rita", decision="APPROVE", reason="a")
    with pytest.raises(IntegrityError), transaction.atomic():
        PayoutApproval.objects.create(payout=payout, reviewer=rita, actor_label="rita", decision="APPROVE",
                                      reason="b")
    with pytest.raises(IntegrityError), transaction.atomic():
        PayoutApproval.objects.create(payout=payout, reviewer=None, actor_label="x", decision="APPROVE", reason="")


@pytest.mark.django_db
def test_a_reviewer_who_administers_the_merchant_decides_nothing(funded, reviewers):
    rita, _ = reviewers
    funded.merchant.administrators.add(rita)
    payout = payout_in(funded, "FROZEN")
    before = money_snapshot(funded)
    for service in (services.payout_approve, services.payout_reject):
        with pytest.raises(services.PayoutActionRefused, match="administers"):
            service(payout_id=payout.pk, reviewer=rita, reason="my own merchant")
    assert (Payout.objects.get(pk=payout.pk).status, money_snapshot(funded)) == ("FROZEN", before)
    assert not payout.approvals.exists()


@pytest.mark.django_db
def test_the_staff_member_who_asked_for_a_payout_decides_nothing(funded, reviewers):
    rita, _ = reviewers
    payout = payout_in(funded, "FROZEN")
    Payout.objects.filter(pk=payout.pk).update(requested_by=rita)
    for service in (services.payout_approve, services.payout_reject):
        with pytest.raises(services.PayoutActionRefused, match="asked for"):
            service(payout_id=payout.pk, reviewer=rita, reason="I asked for it")
    assert Payout.objects.get(pk=payout.pk).status == "FROZEN"


@pytest.mark.django_db
@pytest.mark.parametrize("reason", ["", "   "])
def test_approve_and_reject_without_a_reason_are_refused(funded, reviewers, reason):
    rita, _ = reviewers
    payout = payout_in(funded, "FROZEN")
    with pytest.raises(services.PayoutActionRefused, match="reason is required"):
        services.payout_approve(payout_id=payout.pk, reviewer=rita, reason=reason)
    with pytest.raises(services.PayoutActionRefused, match="reason is required"):
        services.payout_reject(payout_id=payout.pk, reviewer=rita, reason=reason)
    assert Payout.objects.get(pk=payout.pk).status == "FROZEN" and not payout.approvals.exists()


@pytest.mark.django_db
def test_bulk_approve_refuses_a_selection_holding_a_two_approval_payout(client, funded, reviewers):
    rita, _ = reviewers
    small = payout_in(funded, "FROZEN")
    big = big_payout(funded)
    admin_login(client, rita)
    response = act(client, QUEUE, "approve_selected", [small, big], apply="1", reason="select all")
    assert "need two approvals" in response.content.decode()
    assert Payout.objects.get(pk=small.pk).status == "FROZEN"  # all or nothing: the single one waits too
    assert Payout.objects.get(pk=big.pk).status == "FROZEN"
    assert not PayoutApproval.objects.exists()


@pytest.mark.django_db
def test_bulk_approve_without_a_reason_approves_nothing(client, funded, reviewers):
    rita, _ = reviewers
    payout = payout_in(funded, "FROZEN")
    admin_login(client, rita)
    response = act(client, QUEUE, "approve_selected", [payout], apply="1", reason="  ")
    assert "required" in response.content.decode()
    assert Payout.objects.get(pk=payout.pk).status == "FROZEN"


@pytest.mark.django_db
def test_the_cli_decides_alone_and_names_its_operator(funded, adapter_calls):
    payout = big_payout(funded)
    call_command("review_payout", payout.platform_order_no, "--approve", "--operator", "oncall-ana",
                 stdout=open("/dev/null", "w"))
    assert Payout.objects.get(pk=payout.pk).status == "APPROVED"  # a shell on the server is the highest authority
    assert payout.approvals.get().actor_label == "cli:oncall-ana"


@pytest.mark.django_db
def test_adjust_balance_cli_records_the_operator(funded):
    call_command("adjust_balance", funded.merchant_no, "PHP", "500", "--reason", "goodwill", "--operator", "bo",
                 stdout=open("/dev/null", "w"))
    assert AuditLog.objects.filter(action="balance.adjust", actor_label="cli:bo").count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_reviewers_approving_at_the_same_moment_approve_once(merchant):
    fund(merchant, 100_000_000)
    rita, rolf = staff_user("rita", "Risk reviewer"), staff_user("rolf", "Risk reviewer")
    payout = big_payout(merchant)
    outcomes = _at_once([lambda: services.payout_approve(payout_id=payout.pk, reviewer=rita, reason="a"),
                         lambda: services.payout_approve(payout_id=payout.pk, reviewer=rolf, reason="b")])
    assert all(not isinstance(outcome, Exception) for outcome in outcomes), outcomes
    payout.refresh_from_db()
    assert payout.status in ("APPROVED", "PROCESSING", "SUCCESS")  # the submission may already have run
    assert payout.approvals.count() == 2
    assert AuditLog.objects.filter(action="payout.approve", object_id=str(payout.pk)).count() == 1
    assert AuditLog.objects.filter(action="payout.approval", object_id=str(payout.pk)).count() == 1


@pytest.mark.django_db(transaction=True)
def test_one_reviewer_approving_twice_at_the_same_moment_counts_once(merchant):
    fund(merchant, 100_000_000)
    rita = staff_user("rita", "Risk reviewer")
    payout = big_payout(merchant)
    outcomes = _at_once([lambda: services.payout_approve(payout_id=payout.pk, reviewer=rita, reason="a")] * 4)
    refused = [o for o in outcomes if isinstance(o, services.PayoutActionRefused)]
    assert len(refused) == 3, outcomes
    payout.refresh_from_db()
    assert (payout.status, payout.approvals.count()) == ("FROZEN", 1)


def _at_once(calls):
    barrier = threading.Barrier(len(calls))
    outcomes = [None] * len(calls)

    def run(index, call):
        try:
            barrier.wait()
            outcomes[index] = call()
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            outcomes[index] = exc
        finally:
            close_old_connections()

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return outcomes


# --- staff requests -----------------------------------------------------------------------------------------

def ops(username):
    return staff_user(username, "Payout operations")


@pytest.mark.django_db
def test_a_balance_adjustment_takes_effect_only_when_a_second_person_approves(funded):
    otto, olga = ops("otto"), ops("olga")
    available = balances(funded)["available"]
    asked = staff_request_create(kind=StaffRequest.Kind.BALANCE_ADJUSTMENT, requested_by=otto, reason="goodwill",
                                 payload={"merchant_no": funded.merchant_no, "currency": "PHP", "amount": 2500})
    assert balances(funded)["available"] == available
    with pytest.raises(StaffRequestRefused, match="second person"):
        staff_request_approve(request_id=asked.pk, approver=otto, reason="I trust myself")
    assert balances(funded)["available"] == available
    staff_request_approve(request_id=asked.pk, approver=olga, reason="ticket checked")
    assert balances(funded)["available"] == available + 2500
    with pytest.raises(StaffRequestRefused, match="already approved"):
        staff_request_approve(request_id=asked.pk, approver=ops("oleg"), reason="again")
    assert balances(funded)["available"] == available + 2500
    log = AuditLog.objects.get(action="balance.adjust", actor=olga)
    assert "request #" in log.reason and "otto" in log.reason


@pytest.mark.django_db
def test_the_database_refuses_a_request_decided_by_its_requester(funded):
    otto = ops("otto")
    asked = staff_request_create(kind=StaffRequest.Kind.BALANCE_ADJUSTMENT, requested_by=otto, reason="r",
                                 payload={"merchant_no": funded.merchant_no, "currency": "PHP", "amount": 1})
    with pytest.raises(IntegrityError), transaction.atomic():
        StaffRequest.objects.filter(pk=asked.pk).update(decided_by=otto, status="APPROVED")


@pytest.mark.django_db
def test_approving_needs_the_role_of_the_request_and_not_administering_the_merchant(funded, reviewers):
    otto, olga = ops("otto"), ops("olga")
    rita, _ = reviewers
    asked = staff_request_create(kind=StaffRequest.Kind.BALANCE_ADJUSTMENT, requested_by=otto, reason="r",
                                 payload={"merchant_no": funded.merchant_no, "currency": "PHP", "amount": 100})
    with pytest.raises(StaffRequestRefused, match="may not approve"):
        staff_request_approve(request_id=asked.pk, approver=rita, reason="not my role")
    funded.merchant.administrators.add(olga)
    with pytest.raises(StaffRequestRefused, match="administers"):
        staff_request_approve(request_id=asked.pk, approver=olga, reason="my merchant")
    assert StaffRequest.objects.get(pk=asked.pk).status == "PENDING"


@pytest.mark.django_db
def test_a_refused_effect_rolls_the_approval_back_and_the_request_stays_pending(funded, adapter_calls):
    otto, olga = ops("otto"), ops("olga")
    payout = payout_in(funded, "SUCCESS", amount=20_000)
    asked = staff_request_create(kind=StaffRequest.Kind.PAYOUT_REVERSAL, requested_by=otto, reason="bank return",
                                 payload={"payout_id": payout.pk, "reversal_amount": 20_000, "fee_refund": PHP_FEE})
    services.payout_reverse(payout_id=payout.pk, reversal_amount=100, fee_refund=0, source="cli")  # meanwhile
    before = money_snapshot(funded)
    with pytest.raises(StaffRequestRefused, match="already reversed"):  # the change, read again at approval
        staff_request_approve(request_id=asked.pk, approver=olga, reason="ok")
    assert StaffRequest.objects.get(pk=asked.pk).status == "PENDING" and money_snapshot(funded) == before


@pytest.mark.django_db
def test_a_request_without_a_reason_or_role_is_refused(funded, reviewers):
    with pytest.raises(StaffRequestRefused, match="reason"):
        staff_request_create(kind=StaffRequest.Kind.BALANCE_ADJUSTMENT, requested_by=ops("otto"), reason=" ",
                             payload={"merchant_no": funded.merchant_no, "currency": "PHP", "amount": 100})
    with pytest.raises(StaffRequestRefused, match="may not ask"):
        staff_request_create(kind=StaffRequest.Kind.BALANCE_ADJUSTMENT, requested_by=reviewers[0], reason="r",
                             payload={"merchant_no": funded.merchant_no, "currency": "PHP", "amount": 100})
    assert not StaffRequest.objects.exists()


# --- who administers a merchant -----------------------------------------------------------------------------

@pytest.mark.django_db
def test_administrators_are_changed_by_a_superuser_only_and_each_change_is_audited(client, merchant, reviewers):
    from django.contrib.auth.models import Permission

    rita, _ = reviewers
    url = f"/admin/merchants/merchant/{merchant.merchant.pk}/change/"
    clerk = User.objects.create_user("clerk", password="pw-for-tests-1", is_staff=True)
    clerk.user_permissions.add(*Permission.objects.filter(codename__in=["change_merchant", "view_merchant"]))
    admin_login(client, clerk)
    assert 'name="administrators"' not in client.get(url).content.decode()  # read-only for them

    from tests.merchants.test_admin import _empty_inlines

    root = User.objects.create_superuser("root", password="pw")
    admin_login(client, root)
    data = _empty_inlines(merchant)
    data.update({"name": merchant.merchant.name, "is_active": "on", "collection_callback_url": "",
                 "payout_callback_url": "", "administrators": [str(rita.pk)], "change_reason": "account manager"})
    response = client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else ""
    log = AuditLog.objects.get(action="merchant.administrators")
    assert (log.actor, log.old, log.new) == (root, {"administrators": []}, {"administrators": ["rita"]})
