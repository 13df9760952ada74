"""Refunds asked for in the portal (apps/portal/refunds.py): finance asks, an owner independent of the asker approves
with a fresh code, and the refund is made through refund_create; every refusal changes nothing; races on the request
and on the pay-in never refund twice nor more than was paid."""

import pytest
from django.test import Client
from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.collection.models import Refund
from apps.collection.refunds import refund_create
from apps.common.independence import account_act_record
from apps.common.models import AuditLog
from apps.common.step_up import SecondFactorRefused
from apps.ledger.selectors import ledger_verify
from apps.portal import refunds as services
from apps.portal.models import RefundRequest
from apps.portal.refunds import RefundRefused, RefundRequestNotFound
from tests.collection.conftest import balances
from tests.collection.test_refunds import paid_order
from tests.helpers import at_once
from tests.portal.recovery import recovered

pytestmark = pytest.mark.django_db


def ask(person, order, amount, reason="damaged in transit"):
    return services.refund_request_create(actor=person, platform_order_no=order.platform_order_no, amount=amount,
                                          reason=reason)


def approve(person, request):
    return services.refund_request_approve(actor=person, request_id=request.pk, otp_code=person.code())


def unchanged(request, merchant, available):
    request.refresh_from_db()
    assert request.status == RefundRequest.Status.PENDING and request.decided_by_id is None
    assert Refund.objects.filter(mch_refund_no=request.mch_refund_no).count() == 0
    assert balances(merchant)["available"] == available


# --- asking -------------------------------------------------------------------------------------------------------


def test_finance_asks_for_a_refund_and_nothing_moves_until_an_owner_approves(client, merchant, team):
    order = paid_order(client, merchant, amount=100_000)
    request = ask(team["finance"], order, 30_000)
    assert (request.status, request.amount, request.currency) == ("PENDING", 30_000, "PHP")
    assert request.mch_refund_no.startswith("portal-") and len(request.mch_refund_no) == 27
    assert Refund.objects.count() == 0 and balances(merchant)["frozen"] == 0
    row = AuditLog.objects.get(action="portal.refund_request")
    assert row.actor_id == team["finance"].user.pk and row.new["amount"] == 30_000


@pytest.mark.parametrize("role", ["developer", "viewer"])
def test_developers_and_viewers_cannot_ask_for_refunds(client, merchant, team, role):
    order = paid_order(client, merchant)
    with pytest.raises(RefundRefused, match="Only finance or owner"):
        ask(team[role], order, 100)
    assert RefundRequest.objects.count() == 0


def test_asking_is_refused_with_the_contract_codes_and_stores_nothing(client, merchant, team):
    from tests.collection.conftest import create_ok

    unpaid = create_ok(client, merchant, product_code="PHP_COLLECT_D0", amount=50_000)
    paid = paid_order(client, merchant, amount=100_000)
    with pytest.raises(RefundRefused) as refused:
        ask(team["finance"], unpaid, 100)
    assert refused.value.code == "2007" and "not paid" in str(refused.value)
    with pytest.raises(RefundRefused) as refused:
        ask(team["finance"], paid, 100_001)
    assert refused.value.code == "2008" and "exceeds the 100000 still refundable" in str(refused.value)
    d1 = paid_order(client, merchant, amount=500_000, product_code="PHP_COLLECT_D1")  # its credit is settling
    with pytest.raises(RefundRefused) as refused:
        ask(team["finance"], d1, 400_000)  # available holds only the D0 pay-in's 100,000
    assert refused.value.code == "2003"
    with pytest.raises(RefundRefused, match="Say why"):
        ask(team["finance"], paid, 100, reason="  ")
    with pytest.raises(RefundRefused, match="more than zero"):
        ask(team["finance"], paid, 0)
    assert RefundRequest.objects.count() == 0 and Refund.objects.count() == 0


def test_another_merchants_pay_in_is_not_found(client, merchant, other_merchant, team):
    theirs = paid_order(client, other_merchant)
    with pytest.raises(RefundRequestNotFound):
        ask(team["finance"], theirs, 100)
    assert RefundRequest.objects.count() == 0


# --- approving ------------------------------------------------------------------------------------------------------


def test_an_independent_owner_approves_and_the_refund_is_made_with_the_requests_number(client, merchant, team):
    order = paid_order(client, merchant, amount=100_000)
    request = ask(team["finance"], order, 30_000)
    done = approve(team["owner"], request)
    assert done.status == RefundRequest.Status.DONE and done.decided_by_id == team["owner"].user.pk
    refund = done.refund
    assert (refund.mch_refund_no, refund.amount, refund.reason, refund.order_id) == (
        request.mch_refund_no, 30_000, "damaged in transit", order.pk)
    assert balances(merchant) == {"available": 70_000, "settling": 0, "frozen": 30_000}
    assert list(AuditLog.objects.filter(action__startswith="portal.refund").order_by("pk")
                .values_list("action", flat=True)) == ["portal.refund_request", "portal.refund_approve",
                                                        "portal.refund_done"]
    # Processed again (the sweep, a lost request): the same refund, nothing new.
    again = services.refund_request_process(request_id=request.pk)
    assert again.refund_id == refund.pk and Refund.objects.count() == 1


def test_an_owner_cannot_approve_their_own_request_and_keeps_their_code(client, merchant, team):
    order = paid_order(client, merchant)
    owner = team["owner"]
    request = ask(owner, order, 10_000)
    code = owner.code()
    with pytest.raises(RefundRefused, match="You asked for this refund"):
        services.refund_request_approve(actor=owner, request_id=request.pk, otp_code=code)
    unchanged(request, merchant, 100_000)
    assert TOTPDevice.objects.get(user=owner.user).last_t == -1  # the code was not spent
    approve(team["owner2"], request)  # a second, independent owner can
    request.refresh_from_db()
    assert request.status == RefundRequest.Status.DONE


def test_an_owner_the_asker_invited_cannot_approve(client, merchant, team):
    from tests.portal.team import member

    order = paid_order(client, merchant)
    alt = member(merchant.merchant, "owner", "owner.alt@example.com")
    account_act_record(actor=team["finance"].user, subject=alt.user, act="invited")
    request = ask(team["finance"], order, 10_000)
    with pytest.raises(RefundRefused, match="are not independent: .* invited owner.alt@example.com"):
        approve(alt, request)
    unchanged(request, merchant, 100_000)
    assert services.refund_checker_problem(actor=alt, request=request).startswith("You cannot approve this refund")


def test_finance_cannot_approve_and_a_wrong_code_changes_nothing(client, merchant, team):
    order = paid_order(client, merchant)
    request = ask(team["finance"], order, 10_000)
    with pytest.raises(RefundRefused, match="Only owner users may approve"):
        approve(team["finance"], request)
    with pytest.raises(SecondFactorRefused):
        services.refund_request_approve(actor=team["owner"], request_id=request.pk, otp_code="000000")
    unchanged(request, merchant, 100_000)


def test_an_owner_in_a_recoverys_cooling_off_cannot_approve(client, merchant, team,
                                                            django_capture_on_commit_callbacks):
    order = paid_order(client, merchant)
    request = ask(team["finance"], order, 10_000)
    recovered(team["owner"], django_capture_on_commit_callbacks)
    with pytest.raises(RefundRefused, match="you cannot approve refunds until"):  # before any code is looked at
        services.refund_request_approve(actor=team["owner"], request_id=request.pk, otp_code="123456")
    unchanged(request, merchant, 100_000)


def test_a_request_that_became_too_much_is_refused_2008_at_approval_and_stays_waiting(client, merchant, team):
    order = paid_order(client, merchant, amount=100_000)
    request = ask(team["finance"], order, 80_000)
    refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="API-1", amount=50_000)
    with pytest.raises(RefundRefused) as refused:
        approve(team["owner"], request)
    assert refused.value.code == "2008"
    unchanged(request, merchant, 50_000)


def test_a_refusal_by_refund_create_itself_is_the_requests_result(client, merchant, team):
    """Between the approval's check and refund_create the API took the rest: the request records 2008 and nothing
    was refunded by it."""
    order = paid_order(client, merchant, amount=100_000)
    request = ask(team["finance"], order, 80_000)
    services._approve(actor=team["owner"], request_id=request.pk)
    refund_create(merchant=merchant.merchant, mch_order_no=order.mch_order_no, mch_refund_no="API-1", amount=50_000)
    result = services.refund_request_process(request_id=request.pk)
    assert (result.status, result.error_code, result.refund_id) == ("FAILED", "2008", None)
    assert Refund.objects.count() == 1 and balances(merchant)["frozen"] == 50_000


def test_reject_and_withdraw_decide_once_and_refund_nothing(client, merchant, team):
    order = paid_order(client, merchant)
    first, second = ask(team["finance"], order, 10_000), ask(team["finance"], order, 20_000)
    with pytest.raises(RefundRefused, match="Say why"):
        services.refund_request_reject(actor=team["owner"], request_id=first.pk, reason="")
    with pytest.raises(RefundRefused, match="Only owner users may reject"):
        services.refund_request_reject(actor=team["finance"], request_id=first.pk, reason="no")
    services.refund_request_reject(actor=team["owner"], request_id=first.pk, reason="the customer kept it")
    with pytest.raises(RefundRefused, match="Only the person who asked"):
        services.refund_request_withdraw(actor=team["owner"], request_id=second.pk)
    services.refund_request_withdraw(actor=team["finance"], request_id=second.pk)
    for request, status in ((first, "REJECTED"), (second, "WITHDRAWN")):
        with pytest.raises(RefundRefused, match="already"):
            approve(team["owner"], request)
        request.refresh_from_db()
        assert request.status == status
    assert Refund.objects.count() == 0 and balances(merchant)["available"] == 100_000


def test_a_request_whose_maker_was_switched_off_cannot_be_approved(client, merchant, team):
    order = paid_order(client, merchant)
    request = ask(team["finance"], order, 10_000)
    type(team["finance"]).objects.filter(pk=team["finance"].pk).update(is_active=False)
    with pytest.raises(RefundRefused, match="can no longer ask for refunds"):
        approve(team["owner"], request)
    unchanged(request, merchant, 100_000)


# --- races --------------------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_request_approved_by_two_owners_at_once_is_one_refund(client, merchant, team):
    order = paid_order(Client(), merchant, amount=100_000)
    request = ask(team["finance"], order, 40_000)
    owners = [team["owner"], team["owner2"]]
    codes = [owner.code() for owner in owners]
    outcomes = at_once(lambda i: services.refund_request_approve(actor=owners[i], request_id=request.pk,
                                                                 otp_code=codes[i]), 2)
    errors = [exc for _, exc in outcomes if exc is not None]
    assert len(errors) <= 1 and all(isinstance(exc, RefundRefused) and "already" in str(exc) for exc in errors)
    request.refresh_from_db()
    assert request.status == RefundRequest.Status.DONE
    assert Refund.objects.filter(order=order).count() == 1
    assert balances(merchant) == {"available": 60_000, "settling": 0, "frozen": 40_000}
    # Processing it four more times at once (the sweep and lost requests): still one refund.
    RefundRequest.objects.filter(pk=request.pk).update(status=RefundRequest.Status.APPROVED, refund=None)
    at_once(lambda i: services.refund_request_process(request_id=request.pk), 4)
    assert Refund.objects.filter(order=order).count() == 1
    request.refresh_from_db()
    assert request.status == RefundRequest.Status.DONE
    assert ledger_verify()["ok"]


@pytest.mark.django_db(transaction=True)
def test_the_portal_and_the_api_refunding_one_order_at_once_never_exceed_what_was_paid(merchant, team):
    from tests.helpers import signed_post

    order = paid_order(Client(), merchant, amount=100_000)
    requests = [ask(team["finance"], order, 60_000) for _ in range(2)]
    codes = [team["owner"].code()]
    owner2_code = team["owner2"].code()

    def act(i):
        if i == 0:
            return services.refund_request_approve(actor=team["owner"], request_id=requests[0].pk, otp_code=codes[0])
        if i == 1:
            return services.refund_request_approve(actor=team["owner2"], request_id=requests[1].pk,
                                                   otp_code=owner2_code)
        return signed_post(Client(), merchant, "/openapi/v1/refund/create",
                           {"mch_order_no": order.mch_order_no, "mch_refund_no": f"API-{i}", "amount": 60_000})

    outcomes = at_once(act, 4)
    refunded = sum(Refund.objects.filter(order=order).values_list("amount", flat=True))
    assert refunded == 60_000  # one of the four, whichever came first; each 60,000, so a second would exceed
    assert Refund.objects.filter(order=order).count() == 1
    for request in requests:
        request.refresh_from_db()
    # Each portal request lost either before its approval (still waiting, 2008 shown) or in refund_create (FAILED).
    assert sorted(r.status for r in requests).count("DONE") <= 1
    api_answers = [result for result, exc in outcomes[2:] if exc is None]
    assert all(status in (200, 422) for status, _ in api_answers)
    assert balances(merchant) == {"available": 40_000, "settling": 0, "frozen": 60_000}
    assert ledger_verify()["ok"]


def test_a_switched_off_merchant_asks_and_approves_nothing_and_an_approved_request_is_not_refunded(client, merchant,
                                                                                                  team):
    from apps.merchants.models import Merchant

    order = paid_order(client, merchant)
    waiting, approved = ask(team["finance"], order, 10_000), ask(team["finance"], order, 20_000)
    services._approve(actor=team["owner"], request_id=approved.pk)
    Merchant.objects.filter(pk=merchant.merchant.pk).update(is_active=False)
    with pytest.raises(RefundRefused, match="switched off") as refused:
        ask(team["finance"], order, 100)
    assert refused.value.code == "1105"
    with pytest.raises(RefundRefused, match="switched off"):
        approve(team["owner"], waiting)
    unchanged(waiting, merchant, 100_000)
    result = services.refund_request_process(request_id=approved.pk)
    assert (result.status, result.error_code, result.refund_id) == ("FAILED", "1105", None)
    services.refund_request_reject(actor=team["owner"], request_id=waiting.pk, reason="closing down")
    assert Refund.objects.count() == 0 and balances(merchant)["available"] == 100_000
