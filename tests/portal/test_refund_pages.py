"""The portal's refund pages (docs/portal.md, "Refunds"): who may open and post what, another merchant's pay-in and
request not found, refusals in words changing nothing, the lists' filters and the CSV export (csv_cell)."""

import csv
import io

import pytest
from django.test import Client

from apps.collection.models import Refund
from apps.collection.refunds import refund_create
from apps.portal import refunds as services
from apps.portal.models import RefundRequest
from tests.collection.conftest import balances
from tests.collection.test_refunds import paid_order
from tests.portal.support import portal_login

pytestmark = pytest.mark.django_db


def signed_in(person) -> Client:
    return portal_login(Client(), person.user)


def text(response) -> str:
    assert response.status_code == 200, response.status_code
    return b"".join(response.streaming_content).decode() if response.streaming else response.content.decode()


@pytest.fixture
def paid(client, merchant):
    return paid_order(client, merchant, amount=100_000)


def test_the_form_shows_for_finance_and_owners_only_and_asking_parses_pesos(paid, team):
    url = f"/portal/payins/{paid.platform_order_no}/"
    for role in ("developer", "viewer"):
        page = text(signed_in(team[role]).get(url))
        assert 'id="refunds"' in page and 'id="refund-form"' not in page
        assert signed_in(team[role]).post(url + "refund/", {"amount": "1", "reason": "x"}).status_code == 403
    finance = signed_in(team["finance"])
    assert 'id="refund-form"' in text(finance.get(url))
    answer = finance.post(url + "refund/", {"amount": "1,000", "reason": "broken"})
    request = RefundRequest.objects.get()
    assert answer.url == f"/portal/refunds/requests/{request.pk}/" and request.amount == 100_000


@pytest.mark.parametrize("amount, words", [
    ("12.345", "at most 2 decimals"), ("-5", "as digits"), ("abc", "as digits"), ("0", "as digits"),
    ("1,000.01", "more than is still refundable (2008"),
])
def test_a_bad_or_refused_amount_is_said_in_words_and_asks_for_nothing(paid, team, amount, words):
    page = text(signed_in(team["finance"]).post(f"/portal/payins/{paid.platform_order_no}/refund/",
                                                {"amount": amount, "reason": "broken"}, follow=True))
    assert words in page and "Nothing" in page
    assert RefundRequest.objects.count() == 0 and Refund.objects.count() == 0


def test_an_unpaid_pay_in_shows_no_form_and_refuses_2007(client, merchant, team):
    from tests.collection.conftest import create_ok

    unpaid = create_ok(client, merchant, product_code="PHP_COLLECT_D0", amount=50_000)
    finance = signed_in(team["finance"])
    page = text(finance.get(f"/portal/payins/{unpaid.platform_order_no}/"))
    assert "Only a paid pay-in can be refunded" in page and 'id="refund-form"' not in page
    page = text(finance.post(f"/portal/payins/{unpaid.platform_order_no}/refund/", {"amount": "1", "reason": "x"},
                             follow=True))
    assert "this pay-in cannot be refunded (2007" in page and RefundRequest.objects.count() == 0


def test_another_merchants_pay_in_and_request_are_not_found(client, paid, merchant, other_merchant, team,
                                                            other_team):
    theirs = paid_order(client, other_merchant)
    finance, owner = signed_in(team["finance"]), signed_in(team["owner"])
    assert finance.post(f"/portal/payins/{theirs.platform_order_no}/refund/",
                        {"amount": "1", "reason": "x"}).status_code == 404
    request = services.refund_request_create(actor=other_team["finance"], platform_order_no=theirs.platform_order_no,
                                             amount=100, reason="theirs")
    for path in ("", "approve/", "reject/", "withdraw/"):
        client_ = owner if path != "withdraw/" else finance
        call = client_.get if not path else client_.post
        assert call(f"/portal/refunds/requests/{request.pk}/{path}",
                    {"code": "123456", "reason": "x"} if path else None).status_code == 404
    assert theirs.mch_order_no not in text(owner.get("/portal/refunds/requests/"))
    request.refresh_from_db()
    assert request.status == "PENDING"


def test_the_request_page_says_why_an_owner_cannot_approve(paid, team):
    owner = team["owner"]
    own = services.refund_request_create(actor=owner, platform_order_no=paid.platform_order_no, amount=100,
                                         reason="own")
    page = text(signed_in(owner).get(f"/portal/refunds/requests/{own.pk}/"))
    assert 'id="maker-note"' in page and 'id="approve-form"' not in page and 'id="withdraw-form"' in page
    theirs = services.refund_request_create(actor=team["finance"], platform_order_no=paid.platform_order_no,
                                            amount=100, reason="finance's")
    page = text(signed_in(owner).get(f"/portal/refunds/requests/{theirs.pk}/"))
    assert 'id="approve-form"' in page and 'id="withdraw-form"' not in page
    page = text(signed_in(team["finance"]).get(f"/portal/refunds/requests/{theirs.pk}/"))
    assert 'id="decide"' not in page and 'id="withdraw-form"' in page
    # Approving through the page with the asker's own session is refused in words; nothing moves.
    response = signed_in(owner).post(f"/portal/refunds/requests/{own.pk}/approve/", {"code": owner.code()},
                                     follow=True)
    assert "You asked for this refund" in text(response)
    assert Refund.objects.count() == 0 and balances_unchanged(paid)


def balances_unchanged(order) -> bool:
    return Refund.objects.filter(order=order).count() == 0


def test_reject_and_withdraw_through_the_pages(paid, team):
    first = services.refund_request_create(actor=team["finance"], platform_order_no=paid.platform_order_no,
                                           amount=100, reason="a")
    second = services.refund_request_create(actor=team["finance"], platform_order_no=paid.platform_order_no,
                                            amount=200, reason="b")
    owner, finance = signed_in(team["owner"]), signed_in(team["finance"])
    assert finance.post(f"/portal/refunds/requests/{first.pk}/reject/", {"reason": "no"}).status_code == 403
    assert "rejected; nothing was refunded" in text(owner.post(f"/portal/refunds/requests/{first.pk}/reject/",
                                                               {"reason": "duplicate"}, follow=True))
    assert "withdrawn; nothing was refunded" in text(finance.post(f"/portal/refunds/requests/{second.pk}/withdraw/",
                                                                  follow=True))
    assert sorted(RefundRequest.objects.values_list("status", flat=True)) == ["REJECTED", "WITHDRAWN"]
    assert Refund.objects.count() == 0


def test_the_refund_list_filters_by_either_number_and_status_and_the_csv_is_safe(client, merchant, other_merchant,
                                                                               team, paid):
    other = paid_order(client, merchant, amount=50_000)
    theirs = paid_order(client, other_merchant)
    first = refund_create(merchant=merchant.merchant, platform_order_no=paid.platform_order_no,
                          mch_refund_no="RF-1", amount=1_000, reason="=HYPERLINK(\"http://evil\")")
    refund_create(merchant=merchant.merchant, platform_order_no=other.platform_order_no, mch_refund_no="RF-2",
                  amount=2_000)
    refund_create(merchant=other_merchant.merchant, platform_order_no=theirs.platform_order_no,
                  mch_refund_no="RF-1", amount=500)
    request = services.refund_request_create(actor=team["finance"], platform_order_no=paid.platform_order_no,
                                             amount=3_000, reason="portal")
    services.refund_request_approve(actor=team["owner"], request_id=request.pk, otp_code=team["owner"].code())
    viewer = signed_in(team["viewer"])

    def listed(**params):
        page = text(viewer.get("/portal/refunds/", params))
        return {r.refund_no for r in Refund.objects.all() if f'data-refund="{r.refund_no}"' in page}

    mine = set(Refund.objects.filter(merchant=merchant.merchant).values_list("refund_no", flat=True))
    assert listed() == mine and len(mine) == 3
    assert listed(q="RF-1") == {first.refund_no}
    assert listed(q=first.refund_no) == {first.refund_no}
    assert listed(q=paid.mch_order_no) == {first.refund_no, RefundRequest.objects.get().refund.refund_no}
    assert listed(q=theirs.platform_order_no) == set()
    assert listed(status="FAILED") == set() and listed(status="PROCESSING") == mine
    assert "unknown status" in text(viewer.get("/portal/refunds/", {"status": "BOGUS"}))
    assert viewer.get("/portal/refunds/export.csv").status_code == 403
    rows = list(csv.reader(io.StringIO(text(signed_in(team["finance"]).get("/portal/refunds/export.csv")))))
    assert rows[0][:4] == ["refund_no", "mch_refund_no", "platform_order_no", "mch_order_no"]
    by_number = {row[1]: row for row in rows[1:]}
    assert set(by_number) == {"RF-1", "RF-2", request.mch_refund_no}
    assert by_number["RF-1"][8] == "'=HYPERLINK(\"http://evil\")"  # csv_cell: shown as text, never run
    assert (by_number["RF-1"][7], by_number["RF-1"][11]) == ("1000", "API")
    assert by_number[request.mch_refund_no][11:] == [team["finance"].user.username, team["owner"].user.username]
    page = text(viewer.get("/portal/refunds/requests/", {"status": "DONE"}))
    assert f'data-request="{request.pk}"' in page
    assert balances(merchant)["frozen"] == 6_000
