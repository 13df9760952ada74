"""D1 release (docs/api.md, "Collection orders"): settling → available for credits paid before 00:00 Asia/Manila,
exactly once."""

import json
import re
from datetime import datetime
from io import StringIO
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.collection.services import collection_notify_paid, collection_settlement_release, settlement_cutoff
from apps.ledger.models import Posting
from tests.collection.conftest import balances, create_ok

pytestmark = pytest.mark.django_db
MANILA = ZoneInfo("Asia/Manila")


def pay(client, ctx, at: datetime, **params):
    order = create_ok(client, ctx, **params)
    collection_notify_paid(platform_order_no=order.platform_order_no, paid_at=at)
    return order


def test_cutoff_is_midnight_in_manila():
    # 2025-03-10 17:30 UTC is 2025-03-11 01:30 in Manila: the cutoff is 2025-03-11 00:00 +08:00.
    assert settlement_cutoff(datetime(2025, 3, 10, 17, 30, tzinfo=ZoneInfo("UTC"))) == \
        datetime(2025, 3, 11, 0, 0, tzinfo=MANILA)


def test_release_moves_credits_paid_before_cutoff_once(client, merchant, fee_product):
    before_a = pay(client, merchant, datetime(2025, 3, 10, 9, 0, tzinfo=MANILA), amount=10000)
    before_b = pay(client, merchant, datetime(2025, 3, 10, 23, 59, 59, tzinfo=MANILA), amount=9800)
    after = pay(client, merchant, datetime(2025, 3, 11, 0, 0, 0, tzinfo=MANILA), amount=5000)
    d0 = pay(client, merchant, datetime(2025, 3, 10, 9, 0, tzinfo=MANILA), amount=3000, product_code="PHP_COLLECT_D0")
    usd = pay(client, merchant, datetime(2025, 3, 9, 9, 0, tzinfo=MANILA), amount=700, currency="USD",
              product_code="USD_COLLECT_D1")
    assert balances(merchant) == {"available": 3000, "settling": 24800, "frozen": 0}

    with time_machine.travel(datetime(2025, 3, 11, 0, 30, tzinfo=MANILA), tick=False):
        result = collection_settlement_release()
        assert result == {"released": {"PHP": {"count": 2, "amount": 19800}, "USD": {"count": 1, "amount": 700}},
                          "cutoff": "2025-03-11T00:00:00+08:00"}
        assert collection_settlement_release()["released"] == {}
    assert balances(merchant) == {"available": 3000 + 19800, "settling": 5000, "frozen": 0}
    assert balances(merchant, "USD") == {"available": 700, "settling": 0, "frozen": 0}
    for order in (before_a, before_b, usd):
        order.refresh_from_db()
        assert order.settled_at is not None
    for order in (after, d0):
        order.refresh_from_db()
        assert order.settled_at is None
    assert Posting.objects.filter(kind="settlement.release").count() == 3

    with time_machine.travel(datetime(2025, 3, 12, 0, 0, 1, tzinfo=MANILA), tick=False):
        assert collection_settlement_release()["released"] == {"PHP": {"count": 1, "amount": 5000}}
        assert collection_settlement_release()["released"] == {}
    assert balances(merchant) == {"available": 27800, "settling": 0, "frozen": 0}


def test_release_credits_net_of_fee(client, merchant):
    from apps.merchants.models import Product

    Product.objects.filter(code="PHP_COLLECT_D1").update(fee_fixed=50, fee_rate_bps=100)
    pay(client, merchant, datetime(2025, 3, 10, 9, 0, tzinfo=MANILA), amount=10001)  # fee 50 + ceil(100.01) = 151
    with time_machine.travel(datetime(2025, 3, 11, 8, 0, tzinfo=MANILA), tick=False):
        assert collection_settlement_release()["released"] == {"PHP": {"count": 1, "amount": 9850}}
    assert balances(merchant) == {"available": 9850, "settling": 0, "frozen": 0}


def test_release_settlement_command_prints_json(client, merchant):
    pay(client, merchant, datetime(2025, 3, 10, 9, 0, tzinfo=MANILA), amount=10000)
    with time_machine.travel(datetime(2025, 3, 11, 9, 0, tzinfo=MANILA), tick=False):
        out = StringIO()
        call_command("release_settlement", stdout=out)
        assert json.loads(out.getvalue()) == {"released": {"PHP": {"count": 1, "amount": 10000}},
                                              "cutoff": "2025-03-11T00:00:00+08:00"}
        out = StringIO()
        call_command("release_settlement", stdout=out)
        assert json.loads(out.getvalue())["released"] == {}


def test_release_task_is_the_same_release(client, merchant):
    from apps.collection.tasks import release_settlement

    pay(client, merchant, datetime(2025, 3, 10, 9, 0, tzinfo=MANILA), amount=10000)
    with time_machine.travel(datetime(2025, 3, 11, 9, 0, tzinfo=MANILA), tick=False):
        assert release_settlement()["released"] == {"PHP": {"count": 1, "amount": 10000}}
        assert release_settlement()["released"] == {}


def release_command(*args) -> dict:
    out = StringIO()
    call_command("release_settlement", *args, stdout=out)
    return json.loads(out.getvalue())


def test_as_of_tomorrow_shows_d1_on_the_day_of_payment(client, merchant):
    pay(client, merchant, datetime(2025, 3, 10, 9, 0, tzinfo=MANILA), amount=10000)
    with time_machine.travel(datetime(2025, 3, 10, 15, 0, tzinfo=MANILA), tick=False):
        assert release_command()["released"] == {}
        assert release_command("--as-of", "2025-03-11") == {"released": {"PHP": {"count": 1, "amount": 10000}},
                                                             "cutoff": "2025-03-11T00:00:00+08:00"}
        assert release_command("--as-of", "2025-03-11")["released"] == {}
    assert balances(merchant) == {"available": 10000, "settling": 0, "frozen": 0}


def test_as_of_a_past_day_releases_only_what_that_days_run_would(client, merchant):
    pay(client, merchant, datetime(2025, 3, 8, 9, 0, tzinfo=MANILA), amount=1000)
    pay(client, merchant, datetime(2025, 3, 9, 9, 0, tzinfo=MANILA), amount=2000)
    with time_machine.travel(datetime(2025, 3, 11, 9, 0, tzinfo=MANILA), tick=False):
        assert release_command("--as-of", "2025-03-09")["released"] == {"PHP": {"count": 1, "amount": 1000}}
        assert balances(merchant) == {"available": 1000, "settling": 2000, "frozen": 0}
        assert release_command()["released"] == {"PHP": {"count": 1, "amount": 2000}}


def test_dry_run_reports_what_is_due_and_moves_nothing(client, merchant):
    pay(client, merchant, datetime(2025, 3, 10, 9, 0, tzinfo=MANILA), amount=10000)
    pay(client, merchant, datetime(2025, 3, 10, 10, 0, tzinfo=MANILA), amount=9800)
    with time_machine.travel(datetime(2025, 3, 11, 9, 0, tzinfo=MANILA), tick=False):
        assert release_command("--dry-run") == {"due": {"PHP": {"count": 2, "amount": 19800}},
                                                "cutoff": "2025-03-11T00:00:00+08:00", "dry_run": True}
    assert balances(merchant)["settling"] == 19800
    assert not Posting.objects.filter(kind="settlement.release").exists()


@pytest.mark.parametrize("as_of, message", [
    ("2025-03-12", "is after 2025-03-11, the latest day this sandbox deployment releases"),
    ("11/03/2025", "is not a date"),
    ("2025-02-30", "is not a date"),
])
def test_as_of_refuses_later_days_and_bad_dates_and_changes_nothing(client, merchant, as_of, message):
    pay(client, merchant, datetime(2025, 3, 9, 9, 0, tzinfo=MANILA), amount=10000)
    with time_machine.travel(datetime(2025, 3, 10, 9, 0, tzinfo=MANILA), tick=False):
        with pytest.raises(CommandError, match=re.escape(message)):
            call_command("release_settlement", "--as-of", as_of, stdout=StringIO())
    assert balances(merchant) == {"available": 0, "settling": 10000, "frozen": 0}


def test_a_live_deployment_never_releases_before_d1(client, merchant, settings):
    pay(client, merchant, datetime(2025, 3, 10, 9, 0, tzinfo=MANILA), amount=10000)
    settings.PLATFORM_ENVIRONMENT = "live"
    with time_machine.travel(datetime(2025, 3, 10, 15, 0, tzinfo=MANILA), tick=False):
        with pytest.raises(CommandError, match="after 2025-03-10, the latest day this live deployment releases"):
            call_command("release_settlement", "--as-of", "2025-03-11", stdout=StringIO())
        assert release_command("--as-of", "2025-03-10")["released"] == {}
    assert balances(merchant) == {"available": 0, "settling": 10000, "frozen": 0}
