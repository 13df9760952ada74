"""Daily statements (docs/api.md, "Statements"): POST /openapi/v1/statement, JSON or signed CSV, and the daily task that
stores yesterday's. Money moves through the real services; days are days in Asia/Manila."""

import hashlib
import logging
import pickle
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.conf import settings
from django.db.models import Sum

from apps.collection.services import collection_notify_paid
from apps.common import signing
from apps.ledger.models import Entry, Statement
from apps.ledger.selectors import merchant_balances
from apps.ledger.services import balance_adjust
from apps.ledger.statements import split_statement, statement_verify
from apps.ledger.tasks import prepare_daily_statements
from apps.merchants.models import PlatformKey
from apps.merchants.services import platform_key_rotate
from apps.payout import services as payout_services
from payments_merchant import statement_is_final
from tests.collection.conftest import create_ok as collection_create_ok
from tests.helpers import assert_error, assert_ok, at_once, signed_post
from tests.payout.conftest import new_payout

pytestmark = pytest.mark.django_db
MANILA = ZoneInfo("Asia/Manila")
STATEMENT = "/openapi/v1/statement"
D = date(2026, 3, 10)


def at(day: date, hour: int, minute: int, second: int = 0):
    return time_machine.travel(datetime(day.year, day.month, day.day, hour, minute, second, tzinfo=MANILA), tick=False)


def statement(client, ctx, day: date, currency: str = "PHP") -> dict:
    return assert_ok(signed_post(client, ctx, STATEMENT, {"date": day.isoformat(), "currency": currency}))


def statement_csv(client, ctx, day: date, currency: str = "PHP") -> str:
    response = client.post(STATEMENT, data=ctx.signed_body({"date": day.isoformat(), "currency": currency,
                                                            "format": "csv"}), content_type="application/json")
    assert response.status_code == 200 and response["Content-Type"] == "text/csv; charset=utf-8", response.content
    assert f"statement-{ctx.merchant_no}-{currency}-{day.isoformat()}.csv" in response["Content-Disposition"]
    return response.content.decode("utf-8")


def accounts(data: dict) -> dict:
    return {row["account"]: (row["opening"], row["closing"]) for row in data["accounts"]}


def platform_public_key(version: int):
    return signing.load_public_key(PlatformKey.objects.get(version=version).public_key_pem)


def entries_sum(ctx, kind: str, before: datetime) -> int:
    return Entry.objects.filter(account__merchant=ctx.merchant, account__currency_id="PHP", account__kind=kind,
                                posting__created_at__lt=before).aggregate(total=Sum("amount"))["total"] or 0


def adjust(ctx, amount: int, currency: str = "PHP") -> None:
    balance_adjust(merchant_no=ctx.merchant_no, currency=currency, amount=amount, reason="statement test")


@pytest.fixture
def two_days(client, merchant):
    """Movements on D (a credit at noon, a D1 pay-in at 23:59) and on D+1 (a credit at 00:01, the D1 release at
    00:05, a payout hold at 10:00, a large payout held for review at 11:00 and rejected) for `merchant`, in Manila
    time."""
    with at(D, 12, 0):
        adjust(merchant, 6_000_000)
    with at(D, 23, 59):
        order = collection_create_ok(client, merchant, amount=10_000)
        collection_notify_paid(platform_order_no=order.platform_order_no, paid_at=datetime(2026, 3, 10, 23, 59,
                                                                                            tzinfo=MANILA))
    with at(D + timedelta(days=1), 0, 1):
        adjust(merchant, 5_000)
    with at(D + timedelta(days=1), 0, 5):
        from apps.collection.services import collection_settlement_release

        assert collection_settlement_release()["released"] == {"PHP": {"count": 1, "amount": 10_000}}
    with at(D + timedelta(days=1), 10, 0):
        payout = new_payout(merchant, amount=20_000)
    with at(D + timedelta(days=1), 11, 0):
        big = new_payout(merchant, amount=5_000_000)  # at the review threshold: FROZEN, then rejected
        payout_services.payout_reject(payout_id=big.pk, reviewer=None, reason="test", via="test")
    return {"order": order, "payout": payout, "big": big}


def test_entries_at_2359_and_0001_manila_land_in_their_days_and_days_chain(client, merchant, two_days):
    with at(D + timedelta(days=2), 12, 0):
        first, second = statement(client, merchant, D), statement(client, merchant, D + timedelta(days=1))

    assert [(m["time"], m["kind"], m["account"], m["amount"], m["balance"]) for m in first["movements"]] == [
        ("2026-03-10T12:00:00+08:00", "adjustment", "available", 6_000_000, 6_000_000),
        ("2026-03-10T23:59:00+08:00", "collection.success", "settling", 10_000, 10_000),
    ]
    assert first["movements"][1]["cause"] == two_days["order"].platform_order_no
    assert accounts(first) == {"available": (0, 6_000_000), "settling": (0, 10_000), "frozen": (0, 0)}

    times = [m["time"] for m in second["movements"]]
    assert times[0] == "2026-03-11T00:01:00+08:00" and all(t.startswith("2026-03-11T") for t in times)
    assert [(m["kind"], m["account"], m["amount"]) for m in second["movements"]] == [
        ("adjustment", "available", 5_000),
        ("settlement.release", "settling", -10_000), ("settlement.release", "available", 10_000),
        ("hold.place", "available", -21_000), ("hold.place", "frozen", 21_000),
        ("hold.place", "available", -5_001_000), ("hold.place", "frozen", 5_001_000),
        ("hold.release", "frozen", -5_001_000), ("hold.release", "available", 5_001_000),
    ]
    assert {m["cause"] for m in second["movements"] if m["kind"].startswith("hold.")} == {
        two_days["payout"].platform_order_no, two_days["big"].platform_order_no}
    # The closing of D is the opening of D+1; every figure ties out to the ledger's entries.
    for kind, (opening, closing) in accounts(second).items():
        assert opening == accounts(first)[kind][1]
        start = datetime(2026, 3, 11, tzinfo=MANILA)
        assert opening == entries_sum(merchant, kind, start)
        assert closing == opening + sum(m["amount"] for m in second["movements"] if m["account"] == kind)
        assert closing == entries_sum(merchant, kind, start + timedelta(days=1))
    # Nothing moved after D+1: its closing is the ledger's balance.
    assert {kind: closing for kind, (_, closing) in accounts(second).items()} == merchant_balances(
        merchant_id=merchant.merchant.pk, currency="PHP")


def test_todays_closing_equals_the_ledger_balance(client, merchant):
    adjust(merchant, 50_000)
    new_payout(merchant, amount=10_000)
    adjust(merchant, 7, currency="USD")
    today = datetime.now(MANILA).date()
    data = statement(client, merchant, today)
    assert {kind: closing for kind, (_, closing) in accounts(data).items()} == merchant_balances(
        merchant_id=merchant.merchant.pk, currency="PHP")
    assert len(data["movements"]) == 3 and data["date"] == today.isoformat() and data["time_zone"] == "Asia/Manila"
    assert accounts(statement(client, merchant, today, "USD"))["available"] == (0, 7)
    assert not Statement.objects.exists()  # today is not over: built on each request, never stored


def test_todays_statement_says_it_is_provisional_and_the_closed_days_is_final(client, merchant):
    with at(D, 15, 0):
        adjust(merchant, 50_000)
    with at(D, 18, 30):
        today = statement(client, merchant, D)
        today_csv = statement_csv(client, merchant, D)
    # Today: the figures so far, as of the last movement, said in the signed body; not the day's close. The same
    # movements give the same bytes: the JSON and the CSV are one statement.
    assert (today["final"], today["closing_time"]) == (False, "2026-03-10T15:00:00+08:00")
    assert [line.split(",")[1] for line in today_csv.splitlines() if line.startswith("closing,")] == [
        "2026-03-10T15:00:00+08:00"] * 3
    assert f"# digest={today['digest']}\n" in today_csv
    assert statement_verify(today_csv, platform_public_key(1))
    with at(D, 21, 0):
        adjust(merchant, 25)
    with at(D + timedelta(days=1), 0, 30):
        closed = statement(client, merchant, D)
        closed_csv = statement_csv(client, merchant, D)
    assert (closed["final"], closed["closing_time"]) == (True, "2026-03-11T00:00:00+08:00")
    assert [line.split(",")[1] for line in closed_csv.splitlines() if line.startswith("closing,")] == [
        "2026-03-11T00:00:00+08:00"] * 3
    assert accounts(today)["available"] == (0, 50_000) and accounts(closed)["available"] == (0, 50_025)
    assert Statement.objects.get().csv_text == closed_csv  # only the final one is stored
    # What a merchant's SDK reads from a saved file
    assert (statement_is_final(today_csv), statement_is_final(closed_csv)) == (False, True)


def test_signature_verifies_with_the_platform_key_and_fails_after_tampering(client, merchant, two_days):
    with at(D + timedelta(days=2), 12, 0):
        csv_text = statement_csv(client, merchant, D + timedelta(days=1))
        data = statement(client, merchant, D + timedelta(days=1))
    header, body = split_statement(csv_text)
    assert header["merchant_no"] == merchant.merchant_no and header["date"] == "2026-03-11"
    assert body.startswith("row,time,account,kind,cause,amount,balance\n")
    assert header["digest"] == hashlib.sha256(body.encode()).hexdigest() == data["digest"]
    assert (header["signature"], int(header["key_version"])) == (data["signature"], data["key_version"])
    key = platform_public_key(data["key_version"])
    assert statement_verify(csv_text, key)
    # The JSON answer verifies by docs/api.md, "Signing", alone: the string to sign of its flat signed fields.
    fields = {name: data[name] for name in ("merchant_no", "currency", "date", "time_zone", "key_version", "digest",
                                            "sign_type")}
    assert signing.verify(key, fields, data["signature"])

    tampered = bytearray(csv_text.encode())
    position = csv_text.index("hold.release") + len("hold.release,") + 40  # a digit of an amount in the body
    tampered[position] ^= 0x01
    assert not statement_verify(tampered.decode(), key)
    assert not statement_verify(csv_text.replace("# currency=PHP", "# currency=USD"), key)
    other = signing.generate_private_key().public_key()
    assert not statement_verify(csv_text, other)


def test_another_merchant_never_sees_your_movements(client, merchant, other_merchant, two_days):
    with at(D + timedelta(days=2), 12, 0):
        theirs = statement(client, other_merchant, D + timedelta(days=1))
        mine = statement(client, merchant, D + timedelta(days=1))
    assert theirs["movements"] == [] and theirs["merchant_no"] == other_merchant.merchant_no
    assert accounts(theirs) == {"available": (0, 0), "settling": (0, 0), "frozen": (0, 0)}
    assert mine["movements"] and mine["merchant_no"] == merchant.merchant_no


@pytest.mark.parametrize("business, code, http_status, field", [
    ({"date": "2026-3-10"}, "1000", 400, "date"),
    ({"date": "20260310"}, "1000", 400, "date"),
    ({"date": "2026-02-30"}, "1000", 400, "date"),
    ({"date": "2026-03-10\n"}, "1000", 400, "date"),
    ({"date": " 2026-03-10"}, "1000", 400, "date"),
    ({"date": "２０２６-03-10"}, "1000", 400, "date"),
    ({"date": 20260310}, "1000", 400, "date"),
    ({"date": "1969-12-31"}, "1000", 400, "date"),
    ({"date": "tomorrow"}, "1000", 400, "date"),
    ({"currency": "php"}, "1000", 400, "currency"),
    ({"currency": "PHP "}, "1000", 400, "currency"),
    ({"currency": None}, "1000", 400, "currency"),
    ({"currency": "XXX"}, "1001", 422, "currency"),
    ({"currency": "JPY"}, "1001", 422, "currency"),  # known, but not a currency of this merchant
    ({"format": "xml"}, "1000", 400, "format"),
    ({"format": "CSV"}, "1000", 400, "format"),
    ({"format": "csv "}, "1000", 400, "format"),
    ({"format": True}, "1000", 400, "format"),
])
def test_bad_statement_request_is_refused_with_its_code_and_stores_nothing(client, merchant, two_days, business,
                                                                           code, http_status, field):
    params = {"date": D.isoformat(), "currency": "PHP", **business}
    if business.get("date") == "tomorrow":
        params["date"] = (datetime.now(MANILA).date() + timedelta(days=1)).isoformat()
    body = assert_error(signed_post(client, merchant, STATEMENT, params), code, http_status)
    assert field in body["msg"]
    assert not Statement.objects.exists()


def test_tomorrow_in_manila_is_refused_even_while_it_is_still_today_in_utc(client, merchant):
    with at(D, 7, 0):  # 2026-03-09 23:00 UTC: the Manila day is already the 10th
        assert_ok(signed_post(client, merchant, STATEMENT, {"date": "2026-03-10", "currency": "PHP"}))
        assert_error(signed_post(client, merchant, STATEMENT, {"date": "2026-03-11", "currency": "PHP"}), "1000", 400)


def test_daily_task_stores_each_statement_once_however_often_it_runs(client, merchant, other_merchant, two_days,
                                                                     caplog):
    with at(D, 15, 0):
        adjust(merchant, 3, currency="USD")
    caplog.set_level(logging.INFO, logger="apps.ledger.tasks")
    with at(D + timedelta(days=1), 0, 5):  # before STATEMENT_CLOSE_DELAY_SECONDS: D may still be committing
        assert prepare_daily_statements() == 0
    with at(D + timedelta(days=1), 0, 30):
        assert prepare_daily_statements() == 2  # merchant's PHP and USD; other_merchant did not move
        assert prepare_daily_statements() == 0
        assert prepare_daily_statements() == 0
    assert [r.getMessage() for r in caplog.records if r.name == "apps.ledger.tasks"] == ["stored 2 daily statements"]
    stored = Statement.objects.get(merchant=merchant.merchant, currency_id="PHP", date=D)
    assert Statement.objects.count() == 2

    # Served as stored, signed by the key of that time, even after a rotation.
    platform_key_rotate()
    with at(D + timedelta(days=2), 12, 0):
        assert statement_csv(client, merchant, D) == stored.csv_text
        data = statement(client, merchant, D)
        assert (data["signature"], data["key_version"], data["digest"]) == (
            stored.signature, stored.key_version, stored.digest)
        assert statement_verify(stored.csv_text, platform_public_key(stored.key_version))
        # D+1 was not prepared by the task: the request builds it with the current key and stores it, once.
        fresh = statement(client, merchant, D + timedelta(days=1))
        assert fresh["key_version"] == stored.key_version + 1
        assert statement(client, merchant, D + timedelta(days=1))["signature"] == fresh["signature"]
        # A quiet day is built each time, never stored.
        statement(client, merchant, D - timedelta(days=5))
    assert Statement.objects.count() == 3


def test_beat_runs_the_task_at_0030_manila():
    schedule = settings.CELERY_BEAT_SCHEDULE["ledger-daily-statements"]["schedule"]
    last_run = datetime(2026, 3, 10, 0, 30, tzinfo=MANILA)
    with at(D + timedelta(days=1), 0, 29):
        assert schedule.is_due(last_run)[0] is False
        assert schedule.remaining_estimate(last_run) == timedelta(minutes=1)
    with at(D + timedelta(days=1), 0, 30):
        assert schedule.is_due(last_run)[0] is True
        # Beat keeps its schedule in a shelve file: the crontab pickles, and stays in Manila time.
        assert pickle.loads(pickle.dumps(schedule)).is_due(last_run)[0] is True


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_for_a_closed_day_store_it_once_and_serve_the_same(merchant):
    from apps.ledger.services import statement_get

    with at(D, 9, 0):
        adjust(merchant, 1_000)
    with at(D + timedelta(days=1), 9, 0):
        outcomes = at_once(lambda _: statement_get(merchant=merchant.merchant, currency="PHP", day=D), 4)
    assert [exc for _, exc in outcomes] == [None] * 4
    assert len({(result.csv_text, result.signature) for result, _ in outcomes}) == 1
    assert Statement.objects.get().csv_text == outcomes[0][0].csv_text


def test_statement_queries_do_not_grow_with_movements(client, merchant, django_assert_max_num_queries):
    from apps.ledger.services import statement_get

    for amount in range(1, 41):
        adjust(merchant, amount)
    today = datetime.now(MANILA).date()
    # stored?, accounts, openings, the day's entries, the platform key: cached reference data, so outside a request
    # the reference generation, and the key itself while not cached yet
    with django_assert_max_num_queries(6):
        built = statement_get(merchant=merchant.merchant, currency="PHP", day=today)
    assert built.csv_text.count("\nmovement,") == 40
