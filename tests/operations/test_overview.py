"""The operations overview: correct figures for a small scripted data set, who may see it, and
a screenshot in a real browser. The 1M-order timing is bench/overview.py, not a test."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone

from apps.callbacks.models import CallbackEvent
from apps.collection.models import CollectionOrder
from apps.collection.services import collection_create, collection_notify_paid
from apps.common.models import Heartbeat
from apps.operations.charts import hourly_chart_svg
from apps.operations.selectors import operations_overview
from apps.payout.models import Payout
from tests.payout.conftest import PHP_THRESHOLD, adapter_calls, fund, new_payout, staff_user  # noqa: F401
from tests.support.staff import add_authenticator, admin_login, browser_sign_in

URL = "/admin/operations/operationsoverview/"


@pytest.fixture(autouse=True)
def _midday_utc():
    """The overview counts "today" as the settlement day (Asia/Manila, UTC+8), and the scripted data backdates orders
    by up to three hours: run just after the day's start, a payout of "today" fell on yesterday (seen in CI). The
    clock stands at today's 12:00 UTC (20:00 in Manila, the day started 12 hours before), ticking."""
    with time_machine.travel(datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0), tick=True):
        yield


def scripted(ctx):
    """3 pay-ins today (2 paid: 100.00 PHP D0 and 250.00 PHP D1), 1 USD pay-in, 2 payouts (one in review)."""
    fund(ctx, 10_000_000)
    paid_d0 = collection_create(merchant=ctx.merchant, mch_order_no="OV-1", product_code="PHP_COLLECT_D0",
                                amount=10_000, currency="PHP")
    collection_notify_paid(platform_order_no=paid_d0.platform_order_no)
    paid_d1 = collection_create(merchant=ctx.merchant, mch_order_no="OV-2", product_code="PHP_COLLECT_D1",
                                amount=25_000, currency="PHP")
    collection_notify_paid(platform_order_no=paid_d1.platform_order_no)
    collection_create(merchant=ctx.merchant, mch_order_no="OV-3", product_code="PHP_COLLECT_D0", amount=5_000,
                      currency="PHP")
    collection_create(merchant=ctx.merchant, mch_order_no="OV-4", product_code="USD_COLLECT_D0", amount=1_234,
                      currency="USD")
    new_payout(ctx, amount=20_000)
    frozen = new_payout(ctx, amount=PHP_THRESHOLD)
    Payout.objects.filter(pk=frozen.pk).update(created_at=timezone.now() - timedelta(hours=3, minutes=5))
    # One dead callback and one due: both pay-ins had callbacks enqueued only if the merchant has a URL; make two.
    CallbackEvent.objects.create(merchant=ctx.merchant, type="collection.success", platform_order_no="X1",
                                 url="http://127.0.0.1/", payload={}, status=CallbackEvent.Status.DEAD)
    CallbackEvent.objects.create(merchant=ctx.merchant, type="collection.success", platform_order_no="X2",
                                 url="http://127.0.0.1/", payload={}, status=CallbackEvent.Status.PENDING,
                                 next_attempt_at=timezone.now() - timedelta(seconds=5))
    Heartbeat.objects.update_or_create(name="payout.sweeper", defaults={"beat_at": timezone.now()})
    return frozen


def stranded(ctx, monkeypatch):
    """A sandbox payout whose settlement task was lost 20 minutes ago and a pay-in left CREATED 2 h past expiry."""
    from apps.channels import sandbox_payout
    from apps.channels.models import SandboxDisbursement
    from apps.payout.services import payout_submit

    monkeypatch.setattr(sandbox_payout.sandbox_payout_settle, "apply_async", lambda **kwargs: None)
    payout = payout_submit(payout_id=new_payout(ctx, amount=30_000).pk)
    Payout.objects.filter(pk=payout.pk).update(submitted_at=timezone.now() - timedelta(minutes=20))
    SandboxDisbursement.objects.filter(platform_order_no=payout.platform_order_no).update(
        created_at=timezone.now() - timedelta(minutes=20))
    order = collection_create(merchant=ctx.merchant, mch_order_no="OV-LATE", product_code="PHP_COLLECT_D0",
                              amount=7_000, currency="PHP")
    CollectionOrder.objects.filter(pk=order.pk).update(expire_at=timezone.now() - timedelta(hours=2))
    return payout, order


@pytest.mark.django_db
def test_the_figures_match_the_scripted_data(merchant):
    scripted(merchant)
    overview = operations_overview()
    assert overview.payins["PHP"] == {"count": 3, "amount": 40_000, "paid": 2, "paid_amount": 35_000}
    assert overview.payins["USD"]["count"] == 1
    assert overview.payouts["PHP"]["count"] == 2 and overview.payouts["PHP"]["amount"] == 20_000 + PHP_THRESHOLD
    assert overview.review_count == 1
    assert timezone.now() - overview.review_oldest > timedelta(hours=3)
    assert (overview.callbacks_due, overview.callbacks_dead) >= (1, 1)
    assert overview.settling["PHP"]["count"] == 1 and overview.settling["PHP"]["amount"] == 25_000
    beats = dict(overview.heartbeats)
    assert beats["Payout sweeper"] is not None and beats["D1 settlement release"] is None
    assert len(overview.hourly) == 24
    assert sum(i for _, i, _ in overview.hourly) == 4 and sum(o for _, _, o in overview.hourly) == 2


@pytest.mark.django_db
def test_the_page_shows_them_in_major_units_to_operations_staff(client, merchant):
    scripted(merchant)
    dead_before = CallbackEvent.objects.filter(status="dead").count()
    admin_login(client, staff_user("otto", "Payout operations"))
    response = client.get(URL)
    html = response.content.decode()
    assert response.status_code == 200
    assert "\u20b1400.00 PHP" in html and "\u20b1350.00 PHP" in html  # pay-ins today, all and paid
    assert "\u20b1250.00 PHP" in html  # D1 awaiting release
    assert "3h 5m" in html  # the oldest payout in review
    assert f'id="ops-callbacks-dead" class="ops-alert">{dead_before}<' in html
    assert "<svg" in html and "<script" not in html.split('id="ops-overview"')[1]
    assert "Payout sweeper" in html and "never" in html  # the settlement release has not run yet


@pytest.mark.django_db
def test_stuck_orders_are_counted_per_kind_and_linked_to_the_filtered_list(client, merchant, monkeypatch):
    fund(merchant, 10_000_000)
    payout, order = stranded(merchant, monkeypatch)
    figures = {figure.kind.name: figure for figure in operations_overview().stranded}
    assert figures["payout.sandbox_unanswered"].count == 1
    assert figures["payout.sandbox_unanswered"].ages == {"under_5m": 0, "5m_to_1h": 1, "over_1h": 0}
    assert figures["payin.unexpired"].count == 1
    assert sum(figure.count for figure in figures.values()) == 2

    admin_login(client, staff_user("otto", "Payout operations"))
    html = client.get(URL).content.decode()
    tile = html.split('id="ops-stranded"')[1].split('id="ops-jobs"')[0]
    assert 'id="ops-stranded-total" class="ops-alert">2<' in tile
    link = "/admin/payout/payout/?stranded=payout.sandbox_unanswered"
    assert f'href="{link}"' in tile and "20m" in tile
    assert "/admin/collection/" not in tile  # operations staff may not see pay-ins: a count, no link to a 403
    listed = client.get(link).content.decode()
    assert payout.platform_order_no in listed and "0 payouts" not in listed
    assert payout.platform_order_no not in client.get(
        "/admin/payout/payout/?stranded=payout.unsubmitted").content.decode()


@pytest.mark.django_db
def test_a_superuser_is_linked_to_the_stuck_payins_too(client, merchant, monkeypatch):
    fund(merchant, 10_000_000)
    _, order = stranded(merchant, monkeypatch)
    admin_login(client, User.objects.create_superuser("ada", password="pw-for-tests-1"))
    tile = client.get(URL).content.decode().split('id="ops-stranded"')[1].split('id="ops-jobs"')[0]
    link = "/admin/collection/collectionorder/?stranded=payin.unexpired"
    assert f'href="{link}"' in tile
    assert order.platform_order_no in client.get(link).content.decode()


@pytest.mark.django_db
def test_staff_without_the_permission_do_not_see_it(client, merchant):
    admin_login(client, staff_user("rita", "Risk reviewer"))
    assert client.get(URL).status_code == 403
    assert "Operations overview" not in client.get("/admin/").content.decode()


@pytest.mark.django_db
def test_the_settlement_release_records_its_run(merchant):
    from apps.collection.services import collection_settlement_release

    collection_settlement_release()
    assert Heartbeat.objects.filter(name="collection.settlement_release").exists()


def test_the_chart_is_plain_svg_scaled_to_the_busiest_hour():
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    svg = hourly_chart_svg([(now - timedelta(hours=23 - i), i, 0) for i in range(24)])
    assert svg.startswith("<svg") and svg.endswith("</svg>") and "<script" not in svg
    assert ">23<" in svg  # the axis shows the peak
    assert 'height="0.0"' in svg or 'height="0"' in svg  # the empty hour has no bar


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_overview_in_the_browser(live_server, merchant, monkeypatch):
    from tests.helpers import screenshot
    from tests.support.browser import chromium

    scripted(merchant)
    # No worker submits scripted's approved payout: it turns "Approved, never submitted" SUBMIT_GRACE (10 s) after it
    # was approved, which a loaded host reaches before the page loads. Made stranded from the start, it always counts.
    Payout.objects.filter(status=Payout.Status.APPROVED).update(updated_at=timezone.now() - timedelta(minutes=20))
    stranded(merchant, monkeypatch)
    add_authenticator(User.objects.create_superuser("ada", password="pw-for-tests-1"))
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        browser_sign_in(page, live_server.url, "ada", next_path=URL)
        for width in (1280, 1920):
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(f"{live_server.url}{URL}")
            page.wait_for_selector("#ops-overview")
            assert page.locator("svg.ops-chart rect").count() == 48
            assert page.locator("#ops-stranded-total").inner_text() == "3"
            assert page.locator("#ops-stranded a").count() == 3  # a superuser: every kind linked, pay-ins too
            assert page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth") <= 0
            screenshot(page, f"operations-overview-{width}")


# --- the settlement day, reversals, plurals -------------------------------------------------------------------


@pytest.mark.django_db
def test_today_is_the_manila_day_of_settlement_and_statements(merchant):
    """At 01:00 in Manila (17:00 UTC) the day began at 16:00 UTC: a payout of 15:30 UTC (23:30 in Manila) belongs to
    yesterday's statement and is not "today", though it is the same UTC day."""
    from apps.ledger.statements import day_bounds, statement_today

    fund(merchant, 10_000_000)
    now = datetime(2026, 11, 26, 17, 0, tzinfo=UTC)
    with time_machine.travel(now, tick=False):
        yesterday_in_manila = new_payout(merchant, amount=11_100)
        today = new_payout(merchant, amount=22_200)
        Payout.objects.filter(pk=yesterday_in_manila.pk).update(created_at=datetime(2026, 11, 26, 15, 30, tzinfo=UTC))
        Payout.objects.filter(pk=today.pk).update(created_at=datetime(2026, 11, 26, 16, 30, tzinfo=UTC))
        overview = operations_overview(now=now)
    assert overview.day_start == day_bounds(statement_today(now))[0] == datetime(2026, 11, 26, 16, 0, tzinfo=UTC)
    assert overview.payouts["PHP"]["count"] == 1 and overview.payouts["PHP"]["amount"] == 22_200


@pytest.mark.django_db
def test_a_reversed_payout_is_not_counted_as_paid_and_shows_among_reversals(client, merchant, adapter_calls):
    from apps.payout.services import payout_reverse
    from tests.payout.conftest import payout_in

    fund(merchant, 10_000_000)
    kept = payout_in(merchant, "SUCCESS", amount=30_000)
    returned = payout_in(merchant, "SUCCESS", amount=45_000)
    payout_reverse(payout_id=returned.pk, reversal_amount=45_000, fee_refund=returned.fee, reason="bank return")
    overview = operations_overview()
    assert overview.payouts["PHP"]["count"] == 2
    assert (overview.payouts["PHP"]["paid"], overview.payouts["PHP"]["paid_amount"]) == (1, kept.amount)
    assert overview.reversals == {"PHP": {"count": 1, "amount": 45_000, "fee_refund": returned.fee}}

    admin_login(client, staff_user("otto", "Payout operations"))
    html = client.get(URL).content.decode()
    tile = html.split('id="ops-reversals"')[1].split("</div>")[0]
    assert "\u20b1450.00 PHP" in tile and ">1<" in tile


@pytest.mark.django_db
def test_counts_are_pluralized(client, merchant):
    fund(merchant, 10_000_000)
    new_payout(merchant, amount=PHP_THRESHOLD)  # one payout, in review
    admin_login(client, staff_user("otto", "Payout operations"))
    html = client.get(URL).content.decode()
    assert "payouts waiting" not in html and "payout waiting for a reviewer" in html
    assert "1 payouts" not in html and "1 payout<" in html  # the chart's legend
    assert ": 1 payout</title>" in html and ": 0 pay-ins</title>" in html  # the chart's bars
