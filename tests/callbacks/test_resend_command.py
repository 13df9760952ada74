"""resend_callbacks: the operations' re-send by merchant, status, type and creation time; dry run; audited."""

import getpass
import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command

from apps.callbacks.deliver import callback_deliver
from apps.callbacks.models import CallbackEvent
from apps.common.models import AuditLog

S, T = CallbackEvent.Status, CallbackEvent.Type
BASE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def run(*args) -> dict:
    out = io.StringIO()
    call_command("resend_callbacks", *args, stdout=out)
    return json.loads(out.getvalue())


@pytest.fixture
def events(hooked_merchant, other_merchant, enqueue, dispatched):
    """Five events of two merchants in various states, created an hour apart (by name: number, merchant...)."""
    rows = {"C1": (hooked_merchant, T.COLLECTION_SUCCESS, S.DEAD), "P1": (hooked_merchant, T.PAYOUT_TERMINAL, S.DEAD),
            "C2": (hooked_merchant, T.COLLECTION_SUCCESS, S.DELIVERED),
            "C3": (hooked_merchant, T.COLLECTION_SUCCESS, S.PENDING), "C9": (other_merchant.merchant, T.COLLECTION_SUCCESS,
                                                                        S.DEAD)}
    made = {}
    for hour, (no, (merchant, type_, status)) in enumerate(rows.items()):
        event = enqueue(merchant, no=no, type=type_, payload={"platform_order_no": no})
        CallbackEvent.objects.filter(pk=event.pk).update(status=status, created_at=BASE + timedelta(hours=hour),
                                                         next_attempt_at=None if status != S.PENDING else BASE)
        made[no] = event.pk
    return made


def resent_numbers(result: dict) -> list[str]:
    return [event["platform_order_no"] for event in result["events"]]


def test_default_is_every_dead_event_and_each_is_audited_with_the_operator(events, dispatched,
                                                                           django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        result = run("--operator", "ada")
    assert result["resent"] == result["selected"] == 3 and result["dry_run"] is False
    assert resent_numbers(result) == ["C1", "P1", "C9"] and result["skipped"] == []
    assert sorted(dispatched) == sorted([events["C1"], events["P1"], events["C9"]])
    assert set(CallbackEvent.objects.filter(pk__in=dispatched).values_list("status", flat=True)) == {S.PENDING}
    audits = AuditLog.objects.filter(action="callback.resend")
    assert sorted(audits.values_list("object_id", flat=True)) == sorted(str(pk) for pk in dispatched)
    assert set(audits.values_list("actor_label", flat=True)) == {"cli:ada"}


def test_selection_by_merchant_status_type_and_time(events, merchant, other_merchant):
    m = merchant.merchant_no
    assert resent_numbers(run("--merchant", m, "--dry-run")) == ["C1", "P1"]
    assert resent_numbers(run("--merchant", other_merchant.merchant_no, "--dry-run")) == ["C9"]
    assert resent_numbers(run("--status", "delivered", "--dry-run")) == ["C2"]
    assert resent_numbers(run("--type", "payout.terminal", "--dry-run")) == ["P1"]
    # --since and --until are inclusive; a naive time is UTC, an offset is honoured.
    assert resent_numbers(run("--since", "2026-03-01T13:00:00", "--until", "2026-03-01T16:00:00", "--dry-run")) == [
        "P1", "C9"]
    assert resent_numbers(run("--until", "2026-03-01T20:00:00+08:00", "--dry-run")) == ["C1"]
    result = run("--merchant", m, "--type", "collection.success", "--since", "2026-03-01T12:00:00Z")
    assert resent_numbers(result) == ["C1"] and result["resent"] == 1
    assert CallbackEvent.objects.get(pk=events["P1"]).status == S.DEAD  # not selected, untouched


def test_dry_run_prints_the_selection_and_changes_nothing(events, dispatched, django_capture_on_commit_callbacks):
    before = list(CallbackEvent.objects.order_by("pk").values())
    with django_capture_on_commit_callbacks(execute=True):
        result = run("--dry-run")
    assert result["dry_run"] is True and result["selected"] == 3 and result["resent"] == 0
    assert [e["status"] for e in result["events"]] == ["dead"] * 3
    assert list(CallbackEvent.objects.order_by("pk").values()) == before
    assert dispatched == [] and not AuditLog.objects.filter(action="callback.resend").exists()


def test_the_operator_defaults_to_the_os_user(events, other_merchant):
    result = run("--merchant", other_merchant.merchant_no)
    assert result["operator"] == getpass.getuser()
    assert AuditLog.objects.get(action="callback.resend").actor_label == f"cli:{getpass.getuser()}"


def test_a_resent_dead_event_is_delivered_once_more_with_a_fresh_signature(hooked_merchant, callback_receiver,
                                                                         enqueue, settings, clock, dispatched):
    from tests.callbacks.merchant_side import merchant_verifies
    from tests.support.receiver import Reply

    settings.CALLBACK_RETRY_DELAYS_SECONDS = []
    callback_receiver.script(Reply(500, "boom"))
    event = callback_deliver(event_id=enqueue(hooked_merchant, no="C1").pk)
    assert event.status == S.DEAD
    clock.advance(5)
    assert run("--operator", "ada")["resent"] == 1
    event = callback_deliver(event_id=event.pk)
    assert event.status == S.DELIVERED and event.attempts_count == 2
    first, again = [r.body for r in callback_receiver.requests]
    assert (again["timestamp"], again["nonce"]) != (first["timestamp"], first["nonce"]) and merchant_verifies(again)
    assert again["timestamp"] == first["timestamp"] + 5


@pytest.mark.parametrize("args, message", [
    (["--merchant", "M99999999"], "no merchant M99999999"),
    (["--since", "yesterday"], "--since must be an ISO 8601 date-time"),
    (["--until", "2026-13-01"], "--until must be an ISO 8601 date-time"),
    (["--since", "2026-03-02", "--until", "2026-03-01"], "--since must not be after --until"),
    (["--operator", " "], "--operator must be a name"),
    (["--status", "pending"], "invalid choice: 'pending'"),
    (["--type", "payout"], "invalid choice: 'payout'"),
])
def test_bad_input_exits_non_zero_with_a_clear_message_and_changes_nothing(events, args, message):
    before = list(CallbackEvent.objects.order_by("pk").values())
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        run(*args)
    assert list(CallbackEvent.objects.order_by("pk").values()) == before
    assert not AuditLog.objects.filter(action="callback.resend").exists()
