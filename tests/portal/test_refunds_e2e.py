"""A pay-in refunded from the API and from the portal (docs/portal.md, "Refunds"), end to end: a real Celery worker
answers the sandbox refunds, the signed refund callbacks reach a real local HTTP server once each, the day's statement
shows every movement, and the ledger verifies."""

import re
import time

import pytest
from django.core.management import call_command
from django.test import Client

from apps.collection.models import Refund
from apps.ledger.services import statement_get
from apps.ledger.statements import statement_data, statement_today
from apps.portal.models import RefundRequest
from tests.callbacks.merchant_side import merchant_verifies
from tests.collection.conftest import balances
from tests.collection.test_refund_sandbox_e2e import finished, refund_callbacks
from tests.collection.test_refunds import paid_order
from tests.conftest import make_merchant
from tests.helpers import assert_ok, signed_post
from tests.portal.support import portal_login
from tests.portal.team import member
from tests.support.wait import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shop(bootstrapped, rsa_keys, callback_receiver, live_celery_worker):
    return make_merchant(rsa_keys[2], name="Refund Shop", collection_callback_url=callback_receiver.url)


def test_300_by_the_api_and_700_by_the_portal_then_1_more_is_refused_2008(shop, callback_receiver):
    m = shop.merchant
    finance, owner = member(m, "finance"), member(m, "owner")
    order = paid_order(Client(), shop, amount=100_000)  # ₱1,000.00 paid in on the sandbox
    api = assert_ok(signed_post(Client(), shop, "/openapi/v1/refund/create",
                                {"mch_order_no": order.mch_order_no, "mch_refund_no": "RF-API-300",
                                 "amount": 30_000}))
    assert api["refundable"] == 70_000

    asker = portal_login(Client(), finance.user)
    page = asker.get(f"/portal/payins/{order.platform_order_no}/").content.decode()
    assert "still refundable <strong>₱700.00</strong>" in page and "RF-API-300" in page
    answer = asker.post(f"/portal/payins/{order.platform_order_no}/refund/",
                        {"amount": "700.00", "reason": "order cancelled"})
    request = RefundRequest.objects.get(order=order)
    assert answer.status_code == 302 and answer.url == f"/portal/refunds/requests/{request.pk}/"
    assert (request.amount, request.status) == (70_000, "PENDING") and Refund.objects.count() == 1

    approver = portal_login(Client(), owner.user)
    page = approver.get(f"/portal/refunds/requests/{request.pk}/").content.decode()
    assert 'id="approve-form"' in page and "₱700.00" in page
    approver.post(f"/portal/refunds/requests/{request.pk}/approve/", {"code": owner.code()})
    request.refresh_from_db()
    assert request.status == RefundRequest.Status.DONE

    # A third refund of ₱1: from the portal, refused with 2008 in words and nothing asked for; from the API, 2008.
    page = asker.post(f"/portal/payins/{order.platform_order_no}/refund/", {"amount": "1", "reason": "goodwill"},
                      follow=True).content.decode()
    assert "more than is still refundable" in page and "2008" in page
    status, body = signed_post(Client(), shop, "/openapi/v1/refund/create",
                               {"mch_order_no": order.mch_order_no, "mch_refund_no": "RF-API-1", "amount": 100})
    assert (status, body["code"]) == (422, "2008")
    assert RefundRequest.objects.count() == 1 and Refund.objects.count() == 2

    numbers = [api["refund_no"], request.refund.refund_no]
    for number in numbers:
        finished(number, "SUCCESS")
    wait_until(lambda: all(refund_callbacks(callback_receiver, number) for number in numbers),
               what="both refund callbacks")
    time.sleep(1)  # a second delivery would have come by now
    callbacks = [refund_callbacks(callback_receiver, number) for number in numbers]
    assert [len(c) for c in callbacks] == [1, 1]
    assert all(merchant_verifies(c[0]) for c in callbacks)
    assert [c[0]["mch_refund_no"] for c in callbacks] == ["RF-API-300", request.mch_refund_no]
    assert balances(shop) == {"available": 0, "settling": 0, "frozen": 0}

    statement = statement_data(statement_get(merchant=m, currency="PHP", day=statement_today()))
    for number, amount in zip(numbers, (30_000, 70_000)):
        moves = [(mv["kind"], mv["account"], mv["amount"]) for mv in statement["movements"] if mv["cause"] == number]
        assert ("hold.place", "available", -amount) in moves and ("hold.place", "frozen", amount) in moves, moves
        assert any(kind == "hold.settle" and account == "frozen" and value == -amount for kind, account, value in moves)
    # The pay-in's page now shows both refunds, nothing refundable, and no form.
    page = asker.get(f"/portal/payins/{order.platform_order_no}/").content.decode()
    assert "still refundable <strong>₱0.00</strong>" in page and 'id="refund-form"' not in page
    assert len(re.findall(r'data-refund="R', page)) == 2
    call_command("verify_ledger", stdout=open("/dev/null", "w"))  # exits non-zero on any broken invariant
