"""The soak's insider check (tests/soak/insider.py, insider_refused), fed histories: it passes only when every
crossing was refused with a message and nothing a crossing would change changed; the insider's own set-up steps go
either way."""

import random
import threading

import pytest
from django.core.exceptions import ObjectDoesNotExist

from tests.soak.harness import History, Op
from tests.soak.insider import REFUSED, insider_refused, run_paths

STATE = {"balances": {"available": 10 ** 12, "settling": 0, "frozen": 30_001_000},
         "callback_urls": ["http://127.0.0.1:9/m3/collection", "http://127.0.0.1:9/m3/payout"],
         "live_keys": [(1, "ab12")], "active_owners": ["ben@insider.example", "olivia@insider.example"],
         "staff_requests_decided": 0, "payouts_past_review": 0, "second_approvals": 0, "batches_decided": 0,
         "recoveries": 0}


def op(kind: str, outcome: str, detail: str = "", **extra) -> Op:
    return Op("insider", f"insider/{kind}", "K", {}, 1.0, 1.2, 200, None, outcome, extra or None, detail)


def refused_history() -> list[Op]:
    return [op("setup-add-staff", "ok", "The user was added successfully."),
            op("setup-ask-credit", "fail", "Refused for a reason of its own"),  # set-up may go either way
            op("cross-approve-staff-request", "fail", "Request #4 refused: root and acc are not independent: ..."),
            op("cross-second-approval", "fail", "Refused: root and acc are not independent: ..."),
            op("cross-bulk-delete-owner", "fail", "ignored without a message: nothing changed", silent=True),
            op("cross-second-approval", "info", "ConnectionError")]  # a fault in flight: the state decides


def check(ops, before=STATE, after=STATE) -> dict:
    return insider_refused(ops, before, after, History().sample)


def test_a_history_where_every_crossing_was_refused_and_nothing_changed_passes():
    result = check(refused_history(), after=dict(STATE))
    assert result["ok"] is True
    assert (result["attempts"], result["refused"], result["unknown"], result["ignored_without_a_message"]) == (
        4, 3, 1, 1)
    assert result["set_up_steps"] == 2


def test_one_crossing_the_platform_took_fails_the_check():
    ops = refused_history() + [op("cross-approve-invitees-batch", "ok", "Approved: 1 payout created")]
    result = check(ops)
    assert result["ok"] is False
    assert [c["kind"] for c in result["crossed"]] == ["insider/cross-approve-invitees-batch"]


def test_a_refusal_without_a_message_or_with_a_server_error_fails_the_check():
    assert check(refused_history() + [op("cross-approve-recovery", "fail", "")])["ok"] is False
    result = check(refused_history() + [op("cross-approve-recovery", "error", "HTTP 500")])
    assert result["ok"] is False and len(result["errors"]) == 1


def test_a_bare_4xx_in_a_fault_is_unknown_and_the_state_decides_but_outside_one_it_crossed():
    """The admin's request whose database session a fault terminated: its session's save fails and Django answers
    400 (SessionInterrupted) with the refusal's message lost."""
    bare = Op("insider", "insider/cross-set-owner-password", "K", {}, 13.7, 15.9, 400, None, "ok", None, "")
    terminated = {bare.started: "terminate_backends"}

    def in_a_fault(o):
        return terminated.get(o.started)

    result = insider_refused(refused_history() + [bare], STATE, dict(STATE), History().sample, in_a_fault)
    assert result["ok"] is True and result["unknown"] == 2 and result["crossed"] == []
    moved = {**STATE, "active_owners": ["ben@insider.example"]}  # the owner's password did change: it crossed
    assert insider_refused(refused_history() + [bare], STATE, moved, History().sample, in_a_fault)["ok"] is False
    result = check(refused_history() + [bare])  # no fault in flight: a page that does not refuse took it
    assert result["ok"] is False and [c["kind"] for c in result["crossed"]] == ["insider/cross-set-owner-password"]


def test_a_crossing_answered_as_refused_that_still_changed_a_callback_url_fails_the_check():
    after = {**STATE, "callback_urls": [STATE["callback_urls"][0], "https://attacker.example/soak-insider"]}
    result = check(refused_history(), after=after)
    assert result["ok"] is False and set(result["changed"]) == {"callback_urls"}
    assert result["changed"]["callback_urls"]["after"][1] == "https://attacker.example/soak-insider"


def test_money_moved_or_a_second_approval_given_fails_the_check():
    for change in ({"balances": {**STATE["balances"], "available": 10 ** 12 + 1_000_000}},
                   {"second_approvals": 1}, {"staff_requests_decided": 1}, {"recoveries": 1},
                   {"active_owners": STATE["active_owners"] + ["olivia.alt1@insider.example"]}):
        result = check(refused_history(), after={**STATE, **change})
        assert result["ok"] is False and set(result["changed"]) == set(change), change


def test_a_run_where_the_insider_tried_nothing_fails_the_check():
    assert check([op("setup-add-staff", "ok", "added")])["ok"] is False
    assert check(refused_history(), before=None)["ok"] is False


def test_the_success_messages_of_the_pages_are_not_read_as_refusals():
    for said in ("Approved: 1 payout created", "Request #4 approved and applied.", "Password changed successfully.",
                 "The invite works now.", "Payout PO1 approved: now APPROVED",
                 "The totp device “Authenticator app” was deleted successfully."):
        assert not REFUSED.search(said), said


class _Soak:
    """What run_paths reads of the soak: whether the load still runs, and its stop event."""

    def __init__(self, running_for: int):
        self.calls_left = running_for
        self.stop = threading.Event()
        self.stop.wait = lambda seconds: False  # no pause between paths here

    def running(self) -> bool:
        return self.calls_left > 0


def _path_reading_an_account_never_made(soak: _Soak, ends_the_load: bool):
    def path(n: int) -> None:
        soak.calls_left -= 1
        if ends_the_load:
            soak.calls_left = 0
        raise ObjectDoesNotExist("soak-accomplice-1")
    return path


def test_a_path_whose_set_up_the_end_of_the_load_cut_short_ends_the_insider_quietly():
    soak = _Soak(running_for=5)
    run_paths(soak, [_path_reading_an_account_never_made(soak, ends_the_load=True)], random.Random(1))
    assert not soak.running()


def test_the_same_error_while_the_load_runs_is_the_harness_s_and_fails_the_soak():
    soak = _Soak(running_for=5)
    with pytest.raises(ObjectDoesNotExist):
        run_paths(soak, [_path_reading_an_account_never_made(soak, ends_the_load=False)], random.Random(1))
