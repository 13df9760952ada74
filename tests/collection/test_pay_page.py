"""The hosted pay page without a browser: content, security headers, sandbox Pay/Fail, expiry, unknown links."""

from datetime import timedelta

import pytest
import time_machine
from bs4 import BeautifulSoup
from django.test import Client
from django.utils import timezone

from apps.collection.models import CollectionOrder
from apps.collection.presentation import format_duration
from apps.currencies.formatting import format_minor
from apps.collection.services import collection_expire
from apps.currencies.models import Currency
from apps.ledger.models import Posting
from tests.collection.conftest import balances, create_ok

pytestmark = pytest.mark.django_db


def path_of(order: CollectionOrder) -> str:
    return f"/pay/{order.pay_token}"


def soup(response) -> BeautifulSoup:
    assert response["Content-Type"].startswith("text/html")
    return BeautifulSoup(response.content, "html.parser")


def buttons(page: BeautifulSoup) -> list[str]:
    return [b.get_text(strip=True) for b in page.find_all("button")]


def csrf_post(client: Client, order: CollectionOrder, action: str, **headers):
    page = soup(client.get(path_of(order)))
    token = page.find("input", {"name": "csrfmiddlewaretoken"})["value"]
    return client.post(path_of(order), {"csrfmiddlewaretoken": token, "action": action}, headers=headers)


@pytest.fixture
def browser_client():
    return Client(enforce_csrf_checks=True)


def test_amounts_are_formatted_with_the_currency_minor_unit_and_symbol():
    assert format_minor(123456, Currency(code="PHP", symbol="₱", minor_unit=2)) == "₱1,234.56"
    assert format_minor(5, Currency(code="PHP", symbol="₱", minor_unit=2)) == "₱0.05"
    assert format_minor(1234567, Currency(code="JPY", symbol="¥", minor_unit=0)) == "¥1,234,567"
    assert format_minor(1250, Currency(code="KWD", symbol="د.ك.", minor_unit=3)) == "د.ك.\u00a01.250"
    assert format_minor(2**53 - 1, Currency(code="USD", symbol="$", minor_unit=2)) == "$90,071,992,547,409.91"


def test_time_left_is_rendered_for_people():
    assert [format_duration(s) for s in (0, 59, 61, 600, 3599, 86400)] == \
        ["0 s", "59 s", "1 min 01 s", "10 min 00 s", "59 min 59 s", "24 h 00 min"]


def test_pay_page_shows_merchant_subject_amount_time_left_and_sandbox_buttons(client, merchant, browser_client):
    order = create_ok(client, merchant, amount=123456, subject="Two coffees", expire_seconds=900)
    response = browser_client.get(path_of(order))
    assert response.status_code == 200
    page = soup(response)
    assert page.find(attrs={"data-testid": "merchant"}).get_text(strip=True) == "Acme"
    assert page.find(attrs={"data-testid": "subject"}).get_text(strip=True) == "Two coffees"
    assert page.find(attrs={"data-testid": "amount"}).get_text(strip=True) == "₱1,234.56"
    countdown = page.find(attrs={"data-testid": "countdown"})
    assert 895 <= int(countdown["data-seconds-left"]) <= 900
    assert "min" in countdown.get_text()
    assert buttons(page) == ["Pay", "Fail"]
    form = page.find("form")
    assert form["method"] == "post" and form.find("input", {"name": "csrfmiddlewaretoken"})
    assert page.find("meta", {"name": "viewport"})["content"].startswith("width=device-width")
    # No third-party assets: every script and stylesheet is served by the platform itself.
    for tag, attr in (("script", "src"), ("link", "href"), ("img", "src")):
        for element in page.find_all(tag):
            assert element[attr].startswith("/static/"), element


def test_pay_page_sets_security_headers(client, merchant):
    order = create_ok(client, merchant)
    for response in (client.get(path_of(order)), client.get("/pay/unknown-token")):
        assert "default-src 'self'" in response["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in response["Content-Security-Policy"]
        assert response["X-Frame-Options"] == "DENY"
        assert response["Referrer-Policy"] == "no-referrer"
        assert response["X-Content-Type-Options"] == "nosniff"
        assert "no-store" in response["Cache-Control"]


def test_subject_and_merchant_name_are_escaped(client, merchant):
    order = create_ok(client, merchant, subject="<script>alert(1)</script>")
    response = client.get(path_of(order))
    assert b"<script>alert(1)</script>" not in response.content
    assert soup(response).find(attrs={"data-testid": "subject"}).get_text() == "<script>alert(1)</script>"


@pytest.mark.parametrize("token", ["unknown-token", "x" * 200, "a/b", ""])
def test_unknown_pay_link_is_an_html_404_page(client, token):
    response = client.get(f"/pay/{token}")
    assert response.status_code == 404
    page = soup(response)
    assert "not found" in page.find(attrs={"data-testid": "status"}).get_text().lower()
    assert not page.find("button")


def test_pay_button_completes_payment_through_the_notification_service(client, merchant, browser_client):
    order = create_ok(client, merchant, amount=5000, return_url="https://shop.example/thanks?o=1")
    response = csrf_post(browser_client, order, "pay")
    assert (response.status_code, response["Location"]) == (302, path_of(order))
    order.refresh_from_db()
    assert order.status == "SUCCESS" and order.upstream_reference == f"SBX{order.platform_order_no}"
    assert balances(merchant)["settling"] == 5000
    page = soup(browser_client.get(path_of(order)))
    assert page.find(attrs={"data-testid": "status"}).get_text(strip=True) == "Payment received"
    assert page.find(attrs={"data-testid": "return"})["href"] == "https://shop.example/thanks?o=1"
    assert not page.find("button")


def test_pay_reads_the_order_once_under_its_row_lock(client, merchant, browser_client):
    """The Pay locks the order by its pay_token and decides under that lock; no unlocked read before it,
    no second read of the order, and no read of the platform's accounts by the ORM (the posting function finds them)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    order = create_ok(client, merchant, amount=5000)
    page = soup(browser_client.get(path_of(order)))
    token = page.find("input", {"name": "csrfmiddlewaretoken"})["value"]
    for _ in range(2):  # the first creates the platform's accounts (a reference change), the second caches them
        browser_client.post(path_of(create_ok(client, merchant, amount=5000)),
                            {"csrfmiddlewaretoken": token, "action": "pay"})
    with CaptureQueriesContext(connection) as queries:
        response = browser_client.post(path_of(order), {"csrfmiddlewaretoken": token, "action": "pay"})
    assert response.status_code == 302
    reads = [q["sql"] for q in queries.captured_queries
             if q["sql"].startswith("SELECT") and 'FROM "collection_collectionorder"' in q["sql"]]
    assert len(reads) == 1 and reads[0].endswith("FOR UPDATE OF \"collection_collectionorder\""), reads
    # The credit is one call of the ledger's posting function, which locks the merchant's account and reads the
    # platform's by their unique index (docs/ledger.md); no account read of the ORM's.
    ledger = [q["sql"] for q in queries.captured_queries if "ledger_" in q["sql"]]
    assert len(ledger) == 1 and "FROM ledger_post(" in ledger[0], ledger
    assert not [q for q in queries.captured_queries if '"ledger_ledgeraccount"' in q["sql"]]
    # The order's columns only (its merchant and channel are cached reference data), and no savepoint
    # around the callback event (the order's row lock makes a second event of the order impossible).
    assert " JOIN " not in reads[0] and " ORDER BY " not in reads[0], reads
    # (The one savepoint left is the service's durable transaction inside the test's own.)
    savepoints = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SAVEPOINT")]
    assert len(savepoints) == 1, savepoints
    order.refresh_from_db()
    assert order.status == "SUCCESS"


def test_pay_reads_the_reference_generation_with_the_orders_lock_and_sees_a_change_committed_before(
        client, merchant, browser_client):
    """The Pay's cached lookups (its channel, its merchant) take their generation from the order's locking
    statement, not from a statement of their own; a reference change committed before the Pay is still seen."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.callbacks.models import CallbackEvent

    token = soup(browser_client.get(path_of(create_ok(client, merchant)))).find(
        "input", {"name": "csrfmiddlewaretoken"})["value"]

    def pay(order: CollectionOrder) -> CollectionOrder:
        assert browser_client.post(path_of(order), {"csrfmiddlewaretoken": token, "action": "pay"}).status_code == 302
        return order

    orders = [create_ok(client, merchant, amount=5000) for _ in range(4)]
    pay(orders[0]), pay(orders[1])  # the merchant and the channel cached under the current generation
    merchant.merchant.collection_callback_url = "https://shop.example/hooks/new"
    merchant.merchant.save(update_fields=["collection_callback_url"])  # a reference write: the generation moves
    pay(orders[2])
    assert CallbackEvent.objects.get(platform_order_no=orders[2].platform_order_no).url == "https://shop.example/hooks/new"
    with CaptureQueriesContext(connection) as queries:
        pay(orders[3])
    generation_reads = [q["sql"] for q in queries.captured_queries if "common_referencegeneration" in q["sql"]]
    assert len(generation_reads) == 1 and generation_reads[0].endswith('FOR UPDATE OF "collection_collectionorder"')


def test_the_pays_hand_written_lock_reads_every_column_of_the_order_as_the_orm_does(client, merchant):
    """The Pay's lock is a named query (apps/collection/services.py, docs/performance.md, "Measured changes"): its
    columns are CollectionOrder's concrete fields in their order, so a field added to the model fails here, and the
    order it builds is the one the ORM reads, with the reference generation of the same statement."""
    from django.db import transaction

    from apps.collection import services
    from apps.common.models import ReferenceGeneration

    fields = tuple(field.attname for field in CollectionOrder._meta.concrete_fields)
    columns = tuple(field.column for field in CollectionOrder._meta.concrete_fields)
    assert services._ORDER_FIELDS == fields
    select_list = services._PAY_LOCK_BY_TOKEN.removeprefix("SELECT ").split(", (SELECT ")[0]
    assert tuple(select_list.split(", ")) == columns
    order = create_ok(client, merchant, amount=5000, subject="Sub", attach="a=1")
    with transaction.atomic():
        locked, generation = services._order_locked_by_pay_token(order.pay_token)
        assert services._order_locked_by_pay_token("no-such-token") == (None, None)
    stored = CollectionOrder.objects.get(pk=order.pk)
    assert [getattr(locked, name) for name in fields] == [getattr(stored, name) for name in fields]
    assert not locked._state.adding and locked._state.db == "default"
    assert generation == ReferenceGeneration.objects.get(pk=1).value


def test_the_paid_write_stores_what_mark_paid_set_and_moves_updated_at(client, merchant, browser_client):
    """The paid transition's UPDATE is a named query (docs/performance.md, "Measured changes"): it stores the status,
    paid_at and upstream reference the transition set, and updated_at as auto_now did."""
    order = create_ok(client, merchant, amount=5000)
    created_updated_at = order.updated_at
    assert csrf_post(browser_client, order, "pay").status_code == 302
    order.refresh_from_db()
    assert (order.status, order.upstream_reference) == ("SUCCESS", f"SBX{order.platform_order_no}")
    assert created_updated_at < order.paid_at <= order.updated_at


def test_paid_page_without_return_url_has_no_return_link(client, merchant, browser_client):
    order = create_ok(client, merchant)
    csrf_post(browser_client, order, "pay")
    page = soup(browser_client.get(path_of(order)))
    assert page.find(attrs={"data-testid": "status"}) and not page.find(attrs={"data-testid": "return"})


def test_pay_twice_credits_once(client, merchant, browser_client):
    order = create_ok(client, merchant, amount=5000)
    csrf_post(browser_client, order, "pay")
    token = soup(browser_client.get(path_of(order)))  # paid page: no form any more
    assert not token.find("form")
    response = browser_client.post(path_of(order), {"action": "pay",
                                                    "csrfmiddlewaretoken": browser_client.cookies["csrftoken"].value})
    assert response.status_code == 302
    assert Posting.objects.filter(kind="collection.success").count() == 1


def test_fail_button_leaves_order_created_and_shows_try_again(client, merchant, browser_client):
    order = create_ok(client, merchant)
    response = csrf_post(browser_client, order, "fail")
    assert (response.status_code, response["Location"]) == (302, f"{path_of(order)}?result=failed")
    order.refresh_from_db()
    assert order.status == "CREATED" and not Posting.objects.exists()
    page = soup(browser_client.get(response["Location"]))
    assert "try again" in page.find(attrs={"data-testid": "failed"}).get_text()
    assert buttons(page) == ["Pay", "Fail"]


def test_post_without_csrf_token_is_refused(client, merchant, browser_client):
    order = create_ok(client, merchant)
    response = browser_client.post(path_of(order), {"action": "pay"})
    assert response.status_code == 403
    order.refresh_from_db()
    assert order.status == "CREATED"


def test_post_from_no_referrer_page_with_origin_null_and_valid_token_is_accepted(client, merchant, browser_client):
    # Under Referrer-Policy: no-referrer, browsers send `Origin: null` on the page's own form posts.
    order = create_ok(client, merchant)
    response = csrf_post(browser_client, order, "pay", Origin="null")
    assert response.status_code == 302
    order.refresh_from_db()
    assert order.status == "SUCCESS"


def test_the_pay_page_neither_reads_nor_saves_a_session_the_browser_brings(client, merchant, browser_client,
                                                                           admin_user):
    """The hosted page runs without sessions, a signed-in user or messages (SESSIONLESS_PATH_PREFIXES); a
    payer signed in to the portal or the admin on the same host gets no session row read or saved by it. Its own CSRF
    check stays (the tests around this one)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    browser_client.force_login(admin_user)
    order = create_ok(client, merchant)
    with CaptureQueriesContext(connection) as queries:
        page = browser_client.get(path_of(order))
        token = soup(page).find("input", {"name": "csrfmiddlewaretoken"})["value"]
        response = browser_client.post(path_of(order), {"csrfmiddlewaretoken": token, "action": "pay"})
    assert response.status_code == 302
    assert not [q["sql"] for q in queries.captured_queries if "django_session" in q["sql"]]
    order.refresh_from_db()
    assert order.status == "SUCCESS"


def test_post_from_foreign_origin_is_refused(client, merchant, browser_client):
    order = create_ok(client, merchant)
    response = csrf_post(browser_client, order, "pay", Origin="https://evil.example")
    assert response.status_code == 403


def test_expired_order_page_refuses_payment(client, merchant, browser_client):
    order = create_ok(client, merchant, expire_seconds=60, return_url="https://shop.example/")
    token = soup(browser_client.get(path_of(order))).find("input", {"name": "csrfmiddlewaretoken"})["value"]
    collection_expire(order_id=order.pk, now=order.expire_at)
    page = soup(browser_client.get(path_of(order)))
    assert "expired" in page.find(attrs={"data-testid": "status"}).get_text()
    assert not page.find("button")
    response = browser_client.post(path_of(order), {"csrfmiddlewaretoken": token, "action": "pay"})
    assert response.status_code == 409
    assert "expired" in soup(response).find(attrs={"data-testid": "status"}).get_text()
    order.refresh_from_db()
    assert order.status == "EXPIRED" and not Posting.objects.exists()


def test_page_refuses_payment_after_expire_at_even_before_the_expiry_task_ran(client, merchant, browser_client):
    order = create_ok(client, merchant, expire_seconds=60)
    token = soup(browser_client.get(path_of(order))).find("input", {"name": "csrfmiddlewaretoken"})["value"]
    with time_machine.travel(timezone.now() + timedelta(seconds=61), tick=False):
        assert "expired" in soup(browser_client.get(path_of(order))).get_text()
        response = browser_client.post(path_of(order), {"csrfmiddlewaretoken": token, "action": "pay"})
    assert response.status_code == 409
    order.refresh_from_db()
    assert order.status == "CREATED" and not Posting.objects.exists()


def test_page_shows_late_paid_order_as_paid(client, merchant):
    from apps.collection.services import collection_notify_paid

    order = create_ok(client, merchant, expire_seconds=60)
    collection_expire(order_id=order.pk, now=order.expire_at)
    collection_notify_paid(platform_order_no=order.platform_order_no)
    assert soup(client.get(path_of(order))).find(attrs={"data-testid": "status"}).get_text(strip=True) == \
        "Payment received"


def test_unsupported_method_and_unknown_action(client, merchant, browser_client):
    order = create_ok(client, merchant)
    assert client.put(path_of(order)).status_code == 405
    token = soup(browser_client.get(path_of(order))).find("input", {"name": "csrfmiddlewaretoken"})["value"]
    response = browser_client.post(path_of(order), {"csrfmiddlewaretoken": token, "action": "steal"})
    assert response.status_code == 400
    order.refresh_from_db()
    assert order.status == "CREATED"
