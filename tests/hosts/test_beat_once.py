"""Celery beat sends the schedule once however many beats are started (config/beat.py, docs/deployment.md, "Beat,
exactly once"): two real beats on one Redis, no worker, so every task a beat sent is still in the broker's queue to be
counted; one beat SIGKILLed, the other takes over within the lock's life; the dead one started again stands by."""

import json
import re
from datetime import datetime

import pytest
import redis

from tests.faults.processes import Platform
from tests.support.wait import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

LOCK_SECONDS = 3
PERIOD = 5  # callbacks-sweep, the shortest entry of CELERY_BEAT_SCHEDULE
TASK = "apps.callbacks.tasks.sweep_due_deliveries"
SENT = re.compile(r"^(\S+Z) .*Sending due task callbacks-sweep", re.M)


def _sends(*beats) -> list[datetime]:
    """When each beat's log says it sent callbacks-sweep, all beats together, in order."""
    times = [datetime.fromisoformat(at) for beat in beats for at in SENT.findall(beat.log())]
    return sorted(times)


def _queued(client: redis.Redis) -> int:
    """callbacks-sweep messages in the broker's default queue (nothing consumes it)."""
    return sum(json.loads(raw)["headers"]["task"] == TASK for raw in client.lrange("celery", 0, -1))


def _gaps(times: list[datetime]) -> list[float]:
    return [round((b - a).total_seconds(), 2) for a, b in zip(times, times[1:])]


def test_two_beats_send_each_period_once_and_the_standby_takes_over_when_the_holder_dies(procs, private_redis):
    platform = Platform(procs, private_redis, BEAT_LOCK_SECONDS=LOCK_SECONDS)
    client = redis.Redis.from_url(private_redis.url)
    first = platform.start_beat()
    first.wait_for_log("beat: holding the beat lock", timeout=60)
    second = platform.start_beat()
    second.wait_for_log("beat: standing by: another beat holds the beat lock", timeout=60)

    # Both alive for three periods: one sender, each period's sweep sent once.
    wait_until(lambda: len(_sends(first, second)) >= 4, timeout=40, interval=0.2, what="four sweeps sent")
    sends = _sends(first, second)
    assert _sends(second) == [], second.tail()
    assert all(gap >= PERIOD - 0.5 for gap in _gaps(sends)), _gaps(sends)
    assert _queued(client) == len(_sends(first, second))  # each logged send reached the broker, once

    # The holder dies without releasing the lock: the standby sends within the lock's life and its next tick.
    first.kill()
    first.popen.wait(timeout=10)
    before = len(_sends(first))
    second.wait_for_log("beat: holding the beat lock", timeout=LOCK_SECONDS + 5)
    wait_until(lambda: len(_sends(second)) >= 3, timeout=3 * PERIOD + 10, interval=0.2,
               what="the standby sending the schedule")
    assert len(_sends(first)) == before
    taken_over = _sends(second)
    assert (taken_over[0] - _sends(first)[-1]).total_seconds() < PERIOD + LOCK_SECONDS + 2
    assert all(gap >= PERIOD - 0.5 for gap in _gaps(taken_over)), _gaps(taken_over)

    # The dead beat started again (a restarted pod, a second host's beat) stands by: still one sender.
    again = platform.start_beat()
    again.wait_for_log("beat: standing by: another beat holds the beat lock", timeout=60)
    count = len(_sends(second))
    wait_until(lambda: len(_sends(second)) >= count + 2, timeout=3 * PERIOD, interval=0.2, what="two more sweeps")
    assert _sends(again) == [], again.tail()
    everything = _sends(first, second, again)
    assert _queued(client) == len(everything)
    after_takeover = [at for at in everything if at >= taken_over[0]]
    assert all(gap >= PERIOD - 0.5 for gap in _gaps(after_takeover)), _gaps(after_takeover)

    # A beat that stops cleanly releases the lock at once: the standby takes over without waiting for it to run out.
    second.stop()
    assert "holding the beat lock" in again.log() or not client.exists("payments:beat-lock")
    again.wait_for_log("beat: holding the beat lock", timeout=LOCK_SECONDS + 5)
