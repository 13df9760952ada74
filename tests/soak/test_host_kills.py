"""What the soak on several hosts excuses (tests/soak/harness.py, History): a request's 502 or cut connection only
when it was in flight at the kill of a host or of a gunicorn worker, never one sent once the host was dead (the proxy
sends it to a live host), never the platform's own 500, and each host kill's count of requests in flight and lost.
And its beat check (beat_one_sender): the beat that sends a periodic task changes only when the last sender's host
was killed or Redis stalled, never while two beats could both send."""

from datetime import UTC, datetime
from types import SimpleNamespace

from tests.soak.harness import Fleet, History, Op, beat_one_sender

T0 = 1000.0
KILL = {"kind": "kill_host", "started": 10.0, "ended": 10.05, "host": "host0", "back_in_rotation_after": 21.4}


def request(started: float, ended: float, *, http: int | None = None, code: str | None = None, outcome: str = "ok",
            detail: str = "") -> Op:
    """A pay/create sent `started` s into the load and answered (or cut) `ended` s into it."""
    return Op("merchant-0", "pay/create", "S1-merchant-0-1", {}, T0 + started, T0 + ended, http, code, outcome, None,
              detail)


def history(*ops: Op, faults=(KILL,), behind_proxy: bool = True) -> History:
    recorded = History(T0, behind_proxy=behind_proxy)
    for fault in faults:
        recorded.fault(**fault)
    for op in ops:
        recorded.add(op)
    return recorded


def test_a_502_or_a_cut_connection_of_a_request_in_flight_at_the_host_kill_is_excused():
    proxy_502 = request(9.0, 10.2, http=502, outcome="fail", detail="<html><body><h1>502 Bad Gateway</h1>")
    cut = request(9.8, 10.03, detail="ChunkedEncodingError", outcome="info")
    recorded = history(proxy_502, cut)

    assert recorded.failed(proxy_502) and recorded.failed(cut)
    assert recorded.excused(proxy_502) == "kill_host"
    assert recorded.excused(cut) == "kill_host"


def test_a_502_sent_once_the_host_was_dead_or_answered_before_the_kill_is_not_excused():
    after = request(10.06, 10.5, http=502, outcome="fail")
    before = request(8.0, 9.99, http=502, outcome="fail")
    recorded = history(after, before)

    assert recorded.excused(after) is None
    assert recorded.excused(before) is None


def test_the_platforms_own_error_in_flight_at_a_kill_is_not_excused():
    """The surviving host's 500/9999 is the platform's fault, whatever host died meanwhile."""
    own_error = request(9.0, 10.2, http=500, code="9999", outcome="fail")
    recorded = history(own_error)

    assert recorded.failed(own_error)
    assert recorded.excused(own_error) is None


def test_behind_the_proxy_a_cut_connection_fails_unless_in_flight_and_a_client_timeout_never_does():
    cut_later = request(30.0, 30.1, detail="ConnectionError", outcome="info")
    timeout = request(9.0, 10.2, detail="ReadTimeout", outcome="info")
    recorded = history(cut_later, timeout)

    assert recorded.failed(cut_later) and recorded.excused(cut_later) is None
    assert not recorded.failed(timeout)
    # With one host the actors talk to gunicorn itself: a connection cut by a killed worker is Jepsen's info.
    assert not history(faults=(), behind_proxy=False).failed(cut_later)


def test_a_gunicorn_worker_kill_excuses_only_the_requests_in_flight_at_that_instant():
    worker_kill = {"kind": "kill_web_worker", "started": 40.0, "ended": 40.0, "host": "host1", "pid": 4242}
    in_flight = request(39.5, 40.1, http=502, outcome="fail")
    just_after = request(40.01, 40.3, http=502, outcome="fail")
    recorded = history(in_flight, just_after, faults=(KILL, worker_kill))

    assert recorded.excused(in_flight) == "kill_web_worker"
    assert recorded.excused(just_after) is None


def test_each_host_kill_reports_the_requests_in_flight_and_those_lost_with_it():
    lost = request(9.0, 10.2, http=502, outcome="fail")
    survived = request(9.5, 10.4, http=200, code="0")  # served by the other host
    not_in_flight = request(11.0, 11.5, http=200, code="0")
    recorded = history(lost, survived, not_in_flight,
                       faults=(KILL, {**KILL, "started": 50.0, "ended": 50.1, "host": "host1"}))

    assert recorded.kills() == [
        {"host": "host0", "at": 10.0, "back_in_rotation_after": 21.4, "in_flight": 2, "lost": 1},
        {"host": "host1", "at": 50.0, "back_in_rotation_after": 21.4, "in_flight": 0, "lost": 0}]


class Beat:
    """A beat's log: its `Sending due task` lines, at the given seconds into the load."""

    def __init__(self, recorded: History, *sent: float, task: str = "callbacks-sweep"):
        self.lines = [f"{datetime.fromtimestamp(recorded.wall0 + at, UTC).isoformat().replace('+00:00', 'Z')} "
                      f"[info     ] Scheduler: Sending due task {task} (apps.callbacks.tasks.sweep_due_deliveries)"
                      for at in sent]

    def log(self) -> str:
        return "\n".join(self.lines) + "\n"


def fleet_of(host0: list, host1: list) -> Fleet:
    return Fleet("http://127.0.0.1:1", {}, [], hosts=[SimpleNamespace(name="host0", beats=host0),
                                                        SimpleNamespace(name="host1", beats=host1)])


def test_the_beat_sender_changes_only_when_the_last_sender_s_host_was_killed_or_redis_stalled():
    recorded = history()  # host0 killed 10 s into the load
    killed_over = fleet_of([Beat(recorded, 1.0, 6.0), Beat(recorded)], [Beat(recorded, 14.0, 19.0)])
    assert beat_one_sender(killed_over, recorded) == {"ok": True, "sends": 4, "handovers": 1, "two_senders": []}

    stalled = history(faults=({"kind": "stall_redis", "started": 20.0, "ended": 24.5, "seconds": 4.5},))
    lock_ran_out = fleet_of([Beat(stalled, 16.0)], [Beat(stalled, 25.0)])
    assert beat_one_sender(lock_ran_out, stalled)["ok"] is True


def test_two_beats_sending_while_both_hosts_were_up_fail_the_check():
    recorded = history(faults=({**KILL, "host": "host1"},))  # the other host's kill excuses nothing of host0's beat
    both = fleet_of([Beat(recorded, 1.0, 6.0, 11.0)], [Beat(recorded, 3.0)])

    result = beat_one_sender(both, recorded)

    assert result["ok"] is False
    assert result["two_senders"][0] == {"task": "callbacks-sweep", "sent_by": "host0 beat 0",
                                        "then_by": "host1 beat 0", "seconds_apart": 2.0}
