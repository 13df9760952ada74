"""A channel's refund rules as RefundRule rows on the sandbox pay-in channel (docs/channels.md, "Refund rules"): a
method without refunds, refunds only once and in full, a window after payment; each refusal is 2007 naming the rule
and moves nothing. And the rules administered with four eyes: asked for in the admin by one person, in force only
once a second person approves them."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone

from apps.channels.models import RefundRule
from apps.collection.models import CollectionOrder, Refund
from apps.collection.services import collection_notify_paid
from apps.common.models import AuditLog, StaffRequest
from apps.common.staff_requests import StaffRequestRefused, staff_request_approve
from apps.ledger.models import Hold, Posting
from tests.collection.conftest import balances, create_ok
from tests.helpers import signed_post
from tests.support.four_eyes import approval_form, staff_account
from tests.support.staff import admin_login

pytestmark = pytest.mark.django_db

REFUND = "/openapi/v1/refund/create"
REQUESTS = "/admin/common/staffrequest/"


def paid_order(client, merchant, *, amount=100_000) -> CollectionOrder:
    order = create_ok(client, merchant, product_code="PHP_COLLECT_D0", amount=amount)
    return collection_notify_paid(platform_order_no=order.platform_order_no)


def refund(client, merchant, order, mch_refund_no: str, amount: int) -> dict:
    status, body = signed_post(client, merchant, REFUND, {"platform_order_no": order.platform_order_no,
                                                          "mch_refund_no": mch_refund_no, "amount": amount})
    assert (status == 200) == (body["code"] == "0"), body
    return body


def money(merchant) -> tuple:
    """Everything a refused refund must leave as it was."""
    return balances(merchant), Refund.objects.count(), Hold.objects.count(), Posting.objects.count()


def refused_2007(client, merchant, order, mch_refund_no: str, amount: int) -> str:
    before = money(merchant)
    body = refund(client, merchant, order, mch_refund_no, amount)
    assert body["code"] == "2007", body
    assert money(merchant) == before  # nothing held, nothing posted, no refund row
    assert not Refund.objects.filter(mch_refund_no=mch_refund_no).exists()
    return body["msg"]


def test_payments_of_a_method_without_refunds_are_refused_2007_naming_the_rule(client, merchant):
    order = paid_order(client, merchant)
    channel = order.channel
    RefundRule.objects.create(channel=channel, method="otc", refundable=False)  # another method's rule
    assert refund(client, merchant, order, "RF-OTHER-METHOD", 1_000)["code"] == "0"

    RefundRule.objects.create(channel=channel, method="", refundable=False)  # the sandbox's payments: every method
    msg = refused_2007(client, merchant, order, "RF-NONE", 1_000)
    assert f"channel {channel.code} takes no refunds of payments" in msg
    assert order.mch_order_no in msg


def test_a_full_only_rule_refuses_parts_and_takes_one_full_refund(client, merchant):
    order = paid_order(client, merchant, amount=100_000)
    rule = RefundRule.objects.create(channel=order.channel, method="", partial=False)
    msg = refused_2007(client, merchant, order, "RF-PART", 40_000)
    assert f"channel {order.channel.code} refunds payments only once, in full (100000)" in msg

    full = refund(client, merchant, order, "RF-FULL", 100_000)
    assert full["code"] == "0" and (full["data"]["refundable"], full["data"]["status"]) == (0, "PROCESSING")
    assert balances(merchant)["frozen"] == 100_000

    # A second refund after the full one: the rule's refusal, before the amount's 2008.
    assert "only once, in full" in refused_2007(client, merchant, order, "RF-AGAIN", 1)

    # A second partial on an order refunded in part while the channel still took parts: refused once the rule holds.
    rule.partial = True
    rule.save()
    other = paid_order(client, merchant, amount=50_000)
    assert refund(client, merchant, other, "RF-O-1", 10_000)["code"] == "0"
    rule.partial = False
    rule.save()
    assert "only once, in full (50000)" in refused_2007(client, merchant, other, "RF-O-2", 10_000)
    assert "only once, in full" in refused_2007(client, merchant, other, "RF-O-REST", 40_000)


def test_a_refund_after_the_rule_s_window_is_refused_2007_naming_it(client, merchant):
    order = paid_order(client, merchant)
    RefundRule.objects.create(channel=order.channel, method="", window_days=7)
    CollectionOrder.objects.filter(pk=order.pk).update(paid_at=timezone.now() - timedelta(days=6, hours=23))
    assert refund(client, merchant, order, "RF-IN-TIME", 1_000)["code"] == "0"

    CollectionOrder.objects.filter(pk=order.pk).update(paid_at=timezone.now() - timedelta(days=7, minutes=1))
    msg = refused_2007(client, merchant, order, "RF-LATE", 1_000)
    assert f"channel {order.channel.code} refunds payments only within 7 days of payment" in msg


# --- administered with four eyes -------------------------------------------------------------------------------


def staff_with(username: str, permission: str) -> User:
    user = staff_account(username, superuser=False)
    app_label, codename = permission.split(".")
    user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return User.objects.get(pk=user.pk)  # a fresh permission cache


def approve_in_admin(user: User, request: StaffRequest) -> str:
    client = admin_login(Client(), user)
    response = client.post(REQUESTS, approval_form(client, [request.pk], reason="the channel's new terms"),
                           follow=True)
    return " ".join(str(m) for m in response.context["messages"])


def rule_form(channel, **overrides) -> dict:
    data = {"channel": str(channel.pk), "method": "", "refundable": "on", "partial": "on", "window_days": "",
            "change_reason": "the upstream's refund terms"}
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def test_a_refund_rule_asked_for_in_the_admin_holds_only_after_a_second_person_approves_it(client, merchant):
    order = paid_order(client, merchant)
    channel = order.channel
    root = staff_account("root")
    admin_login(client, root)
    page = client.get(f"/admin/channels/channel/{channel.pk}/change/").content.decode()
    assert "none of its own: its adapter&#x27;s" in page or "none of its own: its adapter's" in page
    assert "/admin/channels/refundrule/?channel__id__exact=" in page

    add_page = client.get("/admin/channels/refundrule/add/").content.decode()
    assert channel.code in add_page and "SANDBOX_PHP_PAYOUT" not in add_page  # pay-in channels only
    response = client.post("/admin/channels/refundrule/add/", rule_form(channel, refundable=None))
    assert response.status_code == 302, (response.context["adminform"].form.errors if response.context else "")
    assert not RefundRule.objects.exists()  # asked for, not in force
    request = StaffRequest.objects.get(status=StaffRequest.Status.PENDING)
    assert (request.kind, request.requested_by) == (StaffRequest.Kind.CHANNEL_SETTING, root)
    assert "new refund rule" in request.summary
    assert refund(client, merchant, order, "RF-BEFORE", 1_000)["code"] == "0"  # refunds go on meanwhile

    # The one who asked cannot approve it, a superuser neither; nor someone of another role.
    assert "a second person must decide it" in approve_in_admin(root, request)
    with pytest.raises(StaffRequestRefused):
        staff_request_approve(request_id=request.pk, approver=root, reason="mine")
    otto = staff_with("otto", "channels.change_bankcode")
    with pytest.raises(StaffRequestRefused, match="may not approve"):
        staff_request_approve(request_id=request.pk, approver=otto, reason="not mine to decide")
    assert not RefundRule.objects.exists()

    second = staff_with("second", "channels.change_channel")
    assert "approved" in approve_in_admin(second, request).lower()
    rule = RefundRule.objects.get()
    assert (rule.channel_id, rule.method, rule.refundable) == (channel.pk, "", False)
    assert AuditLog.objects.filter(actor=second, action="refundrule.create", object_id=str(rule.pk)).exists()
    msg = refused_2007(client, merchant, order, "RF-AFTER", 1_000)
    assert f"channel {channel.code} takes no refunds of payments" in msg

    # A change of the rule is a request too: the refusal stays until it is approved.
    response = client.post(f"/admin/channels/refundrule/{rule.pk}/change/", rule_form(channel, window_days="30"))
    assert response.status_code == 302
    change = StaffRequest.objects.get(status=StaffRequest.Status.PENDING)
    assert "refund rule" in change.summary
    refused_2007(client, merchant, order, "RF-STILL", 1_000)
    staff_request_approve(request_id=change.pk, approver=second, reason="the channel's new terms")
    rule.refresh_from_db()
    assert (rule.refundable, rule.window_days) == (True, 30)
    assert refund(client, merchant, order, "RF-AGAIN", 1_000)["code"] == "0"


def test_a_refund_rule_cannot_be_removed_in_the_admin(client, merchant):
    order = paid_order(client, merchant)
    rule = RefundRule.objects.create(channel=order.channel, method="", partial=False)
    admin_login(client, staff_account("root"))
    assert client.get(f"/admin/channels/refundrule/{rule.pk}/delete/").status_code == 403
    assert RefundRule.objects.filter(pk=rule.pk).exists()
