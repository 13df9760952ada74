"""The SDK's self-serve events and statements against a live platform: list and re-send this merchant's callbacks,
download a statement and verify it with the published platform keys (rotated keys included)."""

import json
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command

import payments_merchant as pm
from apps.callbacks.deliver import callback_deliver
from apps.callbacks.models import CallbackEvent
from apps.ledger.services import balance_adjust
from tests.sdk.conftest import platform_public_keys, sdk_client
from tests.sdk.test_cli import key_file, run_cli  # noqa: F401 - the fixture
from tests.support.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def today() -> str:
    return datetime.now(ZoneInfo("Asia/Manila")).date().isoformat()


def dead(event: CallbackEvent) -> CallbackEvent:
    CallbackEvent.objects.filter(pk=event.pk).update(status=CallbackEvent.Status.DEAD, next_attempt_at=None)
    return event


def test_events_are_listed_page_by_page_and_never_another_merchants(client, hooked_merchant, other_merchant,
                                                                     enqueue, live_server):
    for number in range(3):
        enqueue(hooked_merchant, no=f"C{number}")
    enqueue(other_merchant.merchant, no="Cother")

    first = client.callback_events(limit=2)
    assert isinstance(first, pm.CallbackEventPage)
    assert [e["platform_order_no"] for e in first.events] == ["C2", "C1"] and first.next_cursor
    assert [e["platform_order_no"] for e in client.iter_callback_events(limit=1)] == ["C2", "C1", "C0"]
    assert client.callback_events(platform_order_no="Cother").events == []
    assert [e["platform_order_no"] for e in sdk_client(live_server, other_merchant).iter_callback_events()] == \
        ["Cother"]
    with pytest.raises(pm.InvalidRequestError, match="limit"):
        client.callback_events(limit=101)


def test_a_dead_event_is_resent_once_and_a_pending_one_is_refused(client, hooked_merchant, callback_receiver,
                                                                  enqueue, settings):
    settings.CALLBACK_RETRY_DELAYS_SECONDS = []
    callback_receiver.script(Reply(500, "boom"))
    event = callback_deliver(event_id=enqueue(hooked_merchant, no="C1").pk)
    assert event.status == CallbackEvent.Status.DEAD

    answer = client.callback_resend(event_id=event.pk)
    assert (answer["status"], answer["attempts_count"]) == ("pending", 1)
    with pytest.raises(pm.DuplicateOrderError, match="pending"):  # 2001 / 409: already queued
        client.callback_resend(platform_order_no="C1", type="collection.success")
    with pytest.raises(pm.OrderNotFoundError):  # 2002: no such event
        client.callback_resend(event_id=event.pk + 1000)


def test_a_statement_ties_out_and_verifies_and_a_changed_byte_does_not(client, merchant, tmp_path):
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=15000, reason="sdk statement")
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=-2500, reason="sdk statement")
    keys = platform_public_keys()

    statement = client.statement(date=today(), currency="PHP")
    assert isinstance(statement, pm.Statement)
    assert statement.final is False and statement.closing_time == statement.movements[-1]["time"]  # today: provisional
    assert (statement.opening("available"), statement.closing("available")) == (0, 12500)
    assert statement.closing("available") == client.balance("PHP").available
    assert [m["amount"] for m in statement.movements] == [15000, -2500]
    assert pm.verify_statement(statement.raw, keys)["digest"] == statement.digest

    csv_bytes = client.statement_csv(date=today(), currency="PHP")
    assert pm.verify_statement(csv_bytes, keys)["merchant_no"] == merchant.merchant_no
    assert f"# digest={statement.digest}\n".encode() in csv_bytes  # the JSON and the CSV are one statement
    with pytest.raises(pm.StatementVerificationError, match="digest"):
        pm.verify_statement(csv_bytes.replace(b",-2500,", b",-2400,"), keys)
    with pytest.raises(pm.StatementVerificationError, match="signature"):
        pm.verify_statement({**statement.raw, "date": "2020-01-01"}, keys)
    with pytest.raises(pm.StatementVerificationError, match="key_version"):
        pm.verify_statement(csv_bytes, {99: keys[statement.key_version]})
    with pytest.raises(pm.InvalidRequestError, match="date"):
        client.statement(date="2026-2-30", currency="PHP")


def test_a_statement_signed_before_a_key_rotation_still_verifies_with_the_published_keys(client, merchant):
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=100, reason="before rotation")
    before = client.statement_csv(date=today(), currency="PHP")
    call_command("rotate_platform_key", stdout=open("/dev/null", "w"))
    after = client.statement_csv(date=today(), currency="PHP")
    keys = platform_public_keys()
    assert len(keys) == 2
    assert pm.verify_statement(before, keys)["key_version"] == min(keys)
    assert pm.verify_statement(after, keys)["key_version"] == max(keys)


def test_cli_saves_a_statement_and_verifies_it_and_lists_events(live_server, merchant, key_file, tmp_path,
                                                                 hooked_merchant, enqueue):
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=4200, reason="cli statement")
    dead(enqueue(hooked_merchant, no="C7"))
    settings = ["--api-root", live_server.url, "--merchant-no", merchant.merchant_no, "--app-id", merchant.app_id,
                "--key", key_file]
    saved = run_cli(*settings, "statement", "--date", today(), "--currency", "PHP", "--csv",
                    str(tmp_path / "statement.csv"))
    assert saved.returncode == 0, saved.stderr
    assert json.loads(saved.stdout)["file"] == str(tmp_path / "statement.csv")
    with open(tmp_path / "platform_keys.json", "w") as out:
        call_command("platform_keys", stdout=out)
    verified = run_cli("verify-statement", str(tmp_path / "statement.csv"), "--platform-keys",
                       str(tmp_path / "platform_keys.json"))
    assert verified.returncode == 0, verified.stderr
    assert json.loads(verified.stdout)["verified"] is True
    assert json.loads(verified.stdout)["final"] is False  # today's: provisional

    (tmp_path / "statement.csv").write_bytes((tmp_path / "statement.csv").read_bytes().replace(b"4200", b"4300"))
    tampered = run_cli("verify-statement", str(tmp_path / "statement.csv"), "--platform-keys",
                       str(tmp_path / "platform_keys.json"))
    assert tampered.returncode == 1 and json.loads(tampered.stdout)["verified"] is False

    events = run_cli(*settings, "events", "--status", "dead", "--all")
    assert events.returncode == 0, events.stderr
    assert [e["platform_order_no"] for e in json.loads(events.stdout)["events"]] == ["C7"]
    resent = run_cli(*settings, "resend", "--platform-order-no", "C7", "--type", "collection.success")
    assert resent.returncode == 0 and json.loads(resent.stdout)["status"] == "pending"
