"""What a merchant reads in the portal is in its own terms: times in Manila time (said once, in the footer), money in
the currency's format wherever a note mentions it, a reversed payout counted with the successes, every element id
once on a page, and an invite that starts from the least access (docs/portal.md, "Pages")."""

import re
from collections import Counter
from datetime import datetime, timezone as dt_timezone
from zoneinfo import ZoneInfo

import pytest

from apps.payout import services as payout_services
from apps.payout.models import Payout
from tests.portal.support import portal_login, portal_user

pytestmark = pytest.mark.django_db

MANILA = ZoneInfo("Asia/Manila")


def text(response) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def reversed_payout(shop) -> Payout:
    """The shop's payout paid, then returned by the bank (in full, the fee refunded)."""
    payout_services.payout_channel_result(platform_order_no=shop.payout.platform_order_no, outcome="paid")
    return payout_services.payout_channel_returned(platform_order_no=shop.payout.platform_order_no)


def failed_payout(shop) -> Payout:
    payout = payout_services.payout_create(merchant=shop.merchant, mch_order_no="A-OUT-FAILS", product_code="PHP_PAYOUT",
                                           amount=20_000, currency="PHP", payee_name="Ana Reyes",
                                           payee_account="0099887766", bank_code="BDO")
    payout_services.payout_submit(payout_id=payout.pk)
    return payout_services.payout_channel_result(platform_order_no=payout.platform_order_no, outcome="failed",
                                                 fail_reason="account closed")


def test_an_orders_page_shows_its_times_in_manila_and_says_so_once_in_the_footer(client, shops):
    a, _ = shops
    moment = datetime(2026, 11, 25, 17, 30, 5, tzinfo=dt_timezone.utc)  # 01:30:05 the next day in Manila
    Payout.objects.filter(pk=a.payout.pk).update(created_at=moment)
    portal_login(client, portal_user(a.merchant, "finance"))
    page = text(client.get(f"/portal/payouts/{a.payout.platform_order_no}/"))
    assert "2026-11-26 01:30:05" in page and "2026-11-25 17:30" not in page
    assert "UTC" not in page.replace("Manila time (UTC+8)", "")  # said once, in the footer
    assert page.count("Manila time") == 1 and 'id="portal-foot"' in page
    listing = re.sub(r"<[^>]+>", "", text(client.get("/portal/payouts/")))
    assert "2026-11-26 01:30" in listing and "UTC" not in listing.replace("Manila time (UTC+8)", "")


def test_a_payins_state_history_gives_the_pay_pages_deadline_in_manila_time(client, shops):
    a, _ = shops
    portal_login(client, portal_user(a.merchant, "viewer"))
    page = text(client.get(f"/portal/payins/{a.payin.platform_order_no}/"))
    deadline = a.payin.expire_at.astimezone(MANILA)
    assert f"pay page open until {deadline:%Y-%m-%d %H:%M}" in page


def test_a_reversal_in_the_state_history_is_money_in_the_currencys_format(client, shops):
    a, _ = shops
    reversed_payout(a)
    portal_login(client, portal_user(a.merchant, "viewer"))
    page = text(client.get(f"/portal/payouts/{a.payout.platform_order_no}/"))
    history = page[page.index('id="history"'):page.index('id="callbacks"')]
    assert "₱123.45 returned by the bank" in history
    assert "12345" not in history


def test_home_counts_a_reversed_payout_under_success_not_under_failed(client, shops):
    a, _ = shops
    reversed_payout(a)
    failed_payout(a)
    portal_login(client, portal_user(a.merchant, "viewer"))
    page = text(client.get("/portal/"))
    payouts = page[page.index('id="today-payouts"'):]
    rows = re.findall(r"<th>([^<]+)</th>", payouts)
    assert rows.index("of which reversed") == rows.index("Success") + 1, rows
    assert rows.index("Failed") > rows.index("of which reversed")


def test_the_new_payout_page_gives_every_element_an_id_of_its_own(client, shops):
    a, _ = shops
    portal_login(client, portal_user(a.merchant, "finance"))
    page = text(client.get("/portal/payouts/new/"))
    twice = [name for name, count in Counter(re.findall(r'\bid="([^"]+)"', page)).items() if count > 1]
    assert twice == []
    # Each label still leads to its own field.
    assert page.count('for="id_note"') <= 1 and 'id="id_upload_note"' in page and 'id="id_note"' in page


def test_the_team_pages_invite_form_starts_at_the_least_access(client, shops):
    a, _ = shops
    portal_login(client, portal_user(a.merchant, "owner"))
    page = text(client.get("/portal/team/"))
    form = page[page.index('id="invite-form"'):page.index("</form>", page.index('id="invite-form"'))]
    assert re.search(r'<option value="viewer" selected>', form), form
    assert not re.search(r'<option value="owner" selected>', form)


def test_an_approved_batch_is_not_done_while_its_payouts_are_on_their_way_and_its_page_follows_them(merchant, team):
    from django.test import Client

    from apps.payout_batches import services as batch_services
    from tests.payout.conftest import fund
    from tests.portal.team import step_up_code
    from tests.portal.test_payout_batches import GOOD

    fund(merchant, 10_000_000)
    batch = batch_services.payout_batch_from_csv(actor=team["finance"], file_name="p.csv", data=GOOD).batch
    owner = portal_login(Client(), team["owner"].user)
    response = owner.post(f"/portal/payouts/batches/{batch.pk}/approve/", {"code": step_up_code(team["owner"].user)},
                          follow=True)
    page = text(response)
    heading = page[page.index('id="batch-status"'):page.index("</h1>")]
    assert "Done" not in heading and "on their way" in heading
    assert "3 on their way to the bank" in page and '<meta http-equiv="refresh" content="10">' in page
    rows = page[page.index('id="rows"'):]
    assert ">Approved</span>" in rows and ">APPROVED<" not in rows

    # Sent and paid: the batch is done, and the page stops refreshing itself.
    for payout in Payout.objects.filter(merchant=merchant.merchant):
        payout_services.payout_submit(payout_id=payout.pk)
        payout_services.payout_channel_result(platform_order_no=payout.platform_order_no, outcome="paid")
    page = text(owner.get(f"/portal/payouts/batches/{batch.pk}/"))
    heading = page[page.index('id="batch-status"'):page.index("</h1>")]
    assert "Done" in heading and "on their way" not in page and 'http-equiv="refresh"' not in page
    assert page.count(">Success</span>") == 3
