"""The portal's pages against real orders and callbacks: what A's people see, and that B's orders are never among
it, by URL, by number, in a CSV or in a statement (docs/portal.md)."""

import csv
import io
import json

import pytest

from apps.callbacks.models import CallbackEvent
from apps.common.models import AuditLog
from apps.ledger.statements import statement_today, statement_verify
from apps.merchants.selectors import platform_key_current
from tests.portal.support import portal_login, portal_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def finance(client, shops):
    a, _ = shops
    portal_login(client, portal_user(a.merchant, "finance"))
    return client


def text(response) -> str:
    assert response.status_code == 200, response.status_code
    return b"".join(response.streaming_content).decode() if response.streaming else response.content.decode()


def test_home_shows_balances_today_and_only_this_merchants_figures(finance, shops):
    a, b = shops
    page = text(finance.get("/portal/"))
    assert 'data-testid="available-PHP"' in page and 'data-testid="available-USD"' in page
    assert a.merchant.name in page and b.merchant.merchant_no not in page
    assert "Nothing is waiting for you" in page
    assert "1 order," in page  # today's pay-ins (Manila day)


def test_lists_show_this_merchants_orders_and_search_finds_either_number(finance, shops):
    a, b = shops
    page = text(finance.get("/portal/payins/"))
    assert a.payin.platform_order_no in page and b.payin.platform_order_no not in page
    page = text(finance.get("/portal/payouts/"))
    assert a.payout.mch_order_no in page and b.payout.platform_order_no not in page
    assert "0012345678" not in page and "••••5678" in page  # masked in lists
    for number in (a.payout.mch_order_no, a.payout.platform_order_no):
        assert a.payout.platform_order_no in text(finance.get("/portal/payouts/", {"q": number}))
    # B's numbers find nothing, whichever of its numbers is typed.
    for number in (b.payout.mch_order_no, b.payout.platform_order_no):
        page = text(finance.get("/portal/payouts/", {"q": number}))
        assert 'id="no-orders"' in page and f'data-order="{b.payout.platform_order_no}"' not in page


def test_another_merchants_order_page_is_not_found(finance, shops):
    a, b = shops
    assert finance.get(f"/portal/payins/{a.payin.platform_order_no}/").status_code == 200
    assert finance.get(f"/portal/payins/{b.payin.platform_order_no}/").status_code == 404
    assert finance.get(f"/portal/payouts/{b.payout.platform_order_no}/").status_code == 404
    # Not by the other kind's URL either.
    assert finance.get(f"/portal/payouts/{a.payin.platform_order_no}/").status_code == 404


def test_order_page_shows_history_and_every_callback_attempt(finance, shops):
    a, _ = shops
    page = text(finance.get(f"/portal/payins/{a.payin.platform_order_no}/"))
    assert "SUCCESS" in page and "collection.success" in page and "boom" in page
    assert 'data-testid="resend"' in page
    page = text(finance.get(f"/portal/payouts/{a.payout.platform_order_no}/"))
    assert "PROCESSING" in page and "0012345678" in page  # finance sees the full account on the order's page


def test_resend_makes_the_event_due_and_audits_the_person(finance, shops, dispatched,
                                                          django_capture_on_commit_callbacks):
    a, _ = shops
    with django_capture_on_commit_callbacks(execute=True):
        response = finance.post(f"/portal/callbacks/{a.event.pk}/resend/")
    assert response.status_code == 302 and a.payin.platform_order_no in response["Location"]
    a.event.refresh_from_db()
    assert a.event.status == CallbackEvent.Status.PENDING and dispatched[-1] == a.event.pk
    audit = AuditLog.objects.get(action="callback.resend", object_id=str(a.event.pk))
    assert audit.actor.username == f"finance@{a.merchant.merchant_no.lower()}.example"
    # A pending event is refused (being retried already), as the API refuses it.
    response = finance.post(f"/portal/callbacks/{a.event.pk}/resend/", follow=True)
    assert "only delivered or dead events can be re-sent" in response.content.decode()
    assert AuditLog.objects.filter(action="callback.resend").count() == 1


def test_resend_of_another_merchants_callback_is_not_found_and_changes_nothing(finance, shops):
    _, b = shops
    assert finance.post(f"/portal/callbacks/{b.event.pk}/resend/").status_code == 404
    b.event.refresh_from_db()
    assert b.event.status == CallbackEvent.Status.DEAD
    assert not AuditLog.objects.filter(action="callback.resend").exists()


def test_resend_shares_the_merchants_per_minute_limit_with_the_api(finance, shops, settings):
    a, _ = shops
    settings.CALLBACK_RESEND_PER_MINUTE = 1
    from apps.callbacks.resend import merchant_resend_allowed

    assert merchant_resend_allowed(merchant_id=a.merchant.pk)  # the API spent the minute's one
    response = finance.post(f"/portal/callbacks/{a.event.pk}/resend/", follow=True)
    assert "At most 1 callback re-sends per minute" in response.content.decode()
    a.event.refresh_from_db()
    assert a.event.status == CallbackEvent.Status.DEAD


def test_csv_export_is_the_filtered_list_of_this_merchant_only_with_masked_accounts(finance, shops):
    a, b = shops
    rows = list(csv.DictReader(io.StringIO(text(finance.get("/portal/payouts/export.csv")))))
    assert [row["platform_order_no"] for row in rows] == [a.payout.platform_order_no]
    assert rows[0]["payee_account"] == "••••5678" and rows[0]["amount"] == "12345"
    rows = list(csv.DictReader(io.StringIO(text(finance.get("/portal/payins/export.csv", {"status": "SUCCESS"})))))
    assert [row["platform_order_no"] for row in rows] == [a.payin.platform_order_no]
    assert list(csv.DictReader(io.StringIO(text(finance.get("/portal/payins/export.csv",
                                                            {"status": "EXPIRED"}))))) == []
    # Searching B's number in the export finds nothing.
    assert list(csv.DictReader(io.StringIO(text(finance.get("/portal/payins/export.csv",
                                                            {"q": b.payin.mch_order_no}))))) == []


def test_csv_cells_that_a_spreadsheet_would_run_are_made_text(finance, shops):
    a, _ = shops
    from apps.collection.services import collection_create

    collection_create(merchant=a.merchant, mch_order_no="=HYPERLINK(1)", product_code="PHP_COLLECT_D1",
                      amount=5000, currency="PHP", subject="+cmd")
    rows = list(csv.DictReader(io.StringIO(text(finance.get("/portal/payins/export.csv", {"status": "CREATED"})))))
    assert rows[0]["mch_order_no"] == "'=HYPERLINK(1)" and rows[0]["subject"] == "'+cmd"
    # Blanks or a quote before the formula do not hide it (every case: tests/common/test_exports.py).
    collection_create(merchant=a.merchant, mch_order_no="second-order", product_code="PHP_COLLECT_D1",
                      amount=5000, currency="PHP", subject=' "=HYPERLINK(2)')
    rows = list(csv.DictReader(io.StringIO(text(finance.get("/portal/payins/export.csv", {"status": "CREATED"})))))
    assert {row["mch_order_no"]: row["subject"] for row in rows}["second-order"] == "' \"=HYPERLINK(2)"


def test_statement_is_the_apis_signed_statement_of_this_merchant(finance, shops):
    a, b = shops
    day = statement_today().isoformat()
    csv_text = text(finance.get("/portal/statements/", {"date": day, "currency": "PHP", "format": "csv"}))
    assert f"# merchant_no={a.merchant.merchant_no}" in csv_text
    assert a.payin.platform_order_no in csv_text and b.payin.platform_order_no not in csv_text
    from apps.common import signing

    assert statement_verify(csv_text, signing.load_public_key(platform_key_current().public_key_pem))
    data = json.loads(text(finance.get("/portal/statements/", {"date": day, "currency": "PHP", "format": "json"})))
    assert data["merchant_no"] == a.merchant.merchant_no and data["final"] is False
    page = text(finance.get("/portal/statements/", {"date": day, "currency": "PHP"}))
    assert a.payin.platform_order_no in page and "provisional" in page


def test_statement_of_a_currency_not_the_merchants_is_refused(finance, shops):
    page = text(finance.get("/portal/statements/", {"date": statement_today().isoformat(), "currency": "EUR"}))
    assert "statement-errors" in page and "# merchant_no" not in page


def test_list_pages_with_a_keyset_cursor(finance, shops):
    a, _ = shops
    from apps.collection.services import collection_create
    from apps.portal import selectors

    for n in range(5):
        collection_create(merchant=a.merchant, mch_order_no=f"PG-{n}", product_code="PHP_COLLECT_D1", amount=5000,
                          currency="PHP")
    seen = []
    cursor = ""
    flt = selectors.OrderFilter()
    while True:
        rows, cursor = selectors.page(selectors.payins(merchant_id=a.merchant.pk, flt=flt), cursor=cursor, size=2)
        seen += [row.mch_order_no for row in rows]
        if not cursor:
            break
    assert seen == ["PG-4", "PG-3", "PG-2", "PG-1", "PG-0", "A-IN-1"]
    page = text(finance.get("/portal/payins/"))
    assert 'id="next-page"' not in page  # 6 rows: one page of 50


def test_today_on_home_is_the_manila_day(client, merchant, time_machine):
    """23:30 UTC is 07:30 the next day in Manila: an order made then counts in that Manila day, and one made at
    15:59 UTC the day before (23:59 Manila) does not."""
    from datetime import UTC, datetime

    from apps.collection.services import collection_create

    portal_login(client, portal_user(merchant.merchant, "viewer"))
    time_machine.move_to(datetime(2026, 11, 24, 15, 59, tzinfo=UTC), tick=False)
    collection_create(merchant=merchant.merchant, mch_order_no="LATE-24", product_code="PHP_COLLECT_D1",
                      amount=5000, currency="PHP")
    time_machine.move_to(datetime(2026, 11, 24, 23, 30, tzinfo=UTC), tick=False)
    collection_create(merchant=merchant.merchant, mch_order_no="EARLY-25", product_code="PHP_COLLECT_D1",
                      amount=7000, currency="PHP")
    page = text(client.get("/portal/"))
    assert "Today (2026-11-25, Manila)" in page
    assert "PHP: 1 order, ₱70.00" in page


def test_next_page_links_walk_the_filtered_list_without_repeats(finance, shops, monkeypatch):
    a, _ = shops
    from apps.collection.services import collection_create
    from apps.portal import selectors

    monkeypatch.setattr(selectors, "PAGE_SIZE", 2)
    for n in range(4):
        collection_create(merchant=a.merchant, mch_order_no=f"NP-{n}", product_code="PHP_COLLECT_D1", amount=5000,
                          currency="PHP")
    url, seen = "/portal/payins/?status=CREATED", []
    while url:
        page = text(finance.get(url))
        seen += [part.split('"')[0] for part in page.split('data-order="')[1:]]
        url = ("/portal/payins/" + page.split('id="next-page"')[0].rsplit('href="', 1)[1].split('"')[0]
               .replace("&amp;", "&")) if 'id="next-page"' in page else ""
    numbers = [o.mch_order_no for o in selectors.payins(merchant_id=a.merchant.pk,
                                                        flt=selectors.OrderFilter(status="CREATED"))]
    assert numbers == ["NP-3", "NP-2", "NP-1", "NP-0"]
    assert len(seen) == 4 and len(set(seen)) == 4
