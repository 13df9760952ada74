"""Channel health: a circuit breaker per channel, shared by every process (docs/channels.md, "Health").

State: a ChannelHealth row, written only on a transition (closed -> open, a failed probe re-opening it, open ->
closed), so no order ever waits on it; it feeds the route's reference cache (its table bumps the generation), so
the route decision reads no row of its own. Counts: the cache (Redis), one fixed window per channel:
  closed     an outcome adds to the window's failures or successes; CHANNEL_BREAKER_FAILURES failures that are at
             least CHANNEL_BREAKER_FAILURE_RATIO of the window's outcomes open the circuit
  open       nothing new is routed or sent to it for CHANNEL_BREAKER_COOLDOWN_SECONDS
  half-open  (open, cool-down passed; derived, not stored) the route lets CHANNEL_BREAKER_PROBES new orders per
             CHANNEL_BREAKER_PROBE_SLICE_SECONDS through; CHANNEL_BREAKER_CLOSE_AFTER successes close it, one
             failure opens it again for another cool-down
What counts (the adapters' result types, apps.channels.base): UpstreamUnavailable (timeouts, connection errors,
5xx, 401/403/429: the upstream as a whole) is a failure; any answer, a refusal of one payee's account
(UpstreamRejected) included, is a success.
"""

import logging
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import groupby

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from apps.channels.models import Channel, ChannelHealth
from apps.common.limits import cache_count

logger = logging.getLogger(__name__)

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half-open"


@dataclass(frozen=True)
class Candidate:
    """A channel the route may choose, with its breaker state as last written (cached reference data)."""

    channel: Channel
    opened_at: datetime | None = None  # set while the circuit is open
    open_reason: str = ""

    def state(self, now: datetime) -> str:
        return breaker_state(self.opened_at, now)


def breaker_state(opened_at: datetime | None, now: datetime) -> str:
    if opened_at is None:
        return CLOSED
    return HALF_OPEN if now >= opened_at + timedelta(seconds=settings.CHANNEL_BREAKER_COOLDOWN_SECONDS) else OPEN


def channel_health_read(channel_id: int) -> tuple[datetime | None, str]:
    """(opened_at, reason) of the channel's circuit; (None, "") when closed. One indexed row, read at submission."""
    row = ChannelHealth.objects.filter(channel_id=channel_id).values_list("state", "opened_at", "reason").first()
    if row is None or row[0] == ChannelHealth.State.CLOSED:
        return None, ""
    return row[1], row[2]


def channel_state(channel_id: int, *, now: datetime | None = None) -> str:
    """closed / open / half-open, as every process sees it now."""
    return breaker_state(channel_health_read(channel_id)[0], now or timezone.now())


def _window(now: datetime) -> int:
    return int(now.timestamp()) // settings.CHANNEL_BREAKER_WINDOW_SECONDS


def _incr(key: str, timeout: int) -> int | None:
    """The counter after adding one; None when the cache does not answer (the breaker then learns nothing)."""
    try:
        return cache_count(key, timeout=timeout)
    except Exception:  # noqa: BLE001 - a cache outage must not fail the payment that is being sent
        logger.warning("channel breaker: cache unavailable; %s not counted", key)
        return None


def probe_admits(candidate: Candidate, now: datetime) -> bool:
    """Whether a new order may go to a half-open channel: a few per probe slice (every process shares the count)."""
    slice_ = int(now.timestamp()) // settings.CHANNEL_BREAKER_PROBE_SLICE_SECONDS
    key = f"breaker:probe:{candidate.channel.pk}:{int(candidate.opened_at.timestamp())}:{slice_}"
    count = _incr(key, settings.CHANNEL_BREAKER_PROBE_SLICE_SECONDS * 2)
    return count is None or count <= settings.CHANNEL_BREAKER_PROBES


def candidate_available(candidate: Candidate, now: datetime) -> bool:
    state = candidate.state(now)
    return state == CLOSED or (state == HALF_OPEN and probe_admits(candidate, now))


def breaker_record(*, channel: Channel, ok: bool, reason: str = "", now: datetime | None = None) -> str | None:
    """Count one outcome of a call to the channel's upstream; returns 'opened' / 'closed' when this call made the
    transition (one process does: conditional UPDATE), else None. Call outside the order's transaction."""
    now = now or timezone.now()
    opened_at, _ = channel_health_read(channel.pk)
    state = breaker_state(opened_at, now)
    if state == OPEN:
        return None  # a call that started before the circuit opened: the cool-down decides
    if state == HALF_OPEN:
        stamp = int(opened_at.timestamp())
        if not ok:
            return _reopen(channel, opened_at=opened_at, reason=f"probe failed: {reason}"[:255], now=now)
        successes = _incr(f"breaker:ok:{channel.pk}:{stamp}", settings.CHANNEL_BREAKER_COOLDOWN_SECONDS * 20)
        if successes is not None and successes >= settings.CHANNEL_BREAKER_CLOSE_AFTER:
            return _close(channel, opened_at=opened_at, now=now)
        return None
    window = settings.CHANNEL_BREAKER_WINDOW_SECONDS
    base = f"breaker:{channel.pk}:{_window(now)}"
    if ok:
        _incr(f"{base}:ok", window * 2)
        return None
    failures = _incr(f"{base}:fail", window * 2)
    if failures is None or failures < settings.CHANNEL_BREAKER_FAILURES:
        return None
    try:
        successes = int(cache.get(f"{base}:ok") or 0)
    except Exception:  # noqa: BLE001
        successes = 0
    if failures < settings.CHANNEL_BREAKER_FAILURE_RATIO * (failures + successes):
        return None
    return _open(channel, reason=f"{failures} failures in {window} s, last: {reason}"[:255], now=now)


def _ensure_row(channel: Channel) -> None:
    ChannelHealth.objects.get_or_create(channel=channel)


@transaction.atomic
def _open(channel: Channel, *, reason: str, now: datetime) -> str | None:
    _ensure_row(channel)
    if not ChannelHealth.objects.filter(channel=channel, state=ChannelHealth.State.CLOSED).update(
            state=ChannelHealth.State.OPEN, opened_at=now, reason=reason, changed_at=now):
        return None
    logger.warning("channel %s: circuit opened (%s)", channel.code, reason)
    return "opened"


@transaction.atomic
def _reopen(channel: Channel, *, opened_at: datetime, reason: str, now: datetime) -> str | None:
    if not ChannelHealth.objects.filter(channel=channel, state=ChannelHealth.State.OPEN, opened_at=opened_at).update(
            opened_at=now, reason=reason, changed_at=now):
        return None
    logger.warning("channel %s: circuit opened again (%s)", channel.code, reason)
    return "opened"


@transaction.atomic
def _close(channel: Channel, *, opened_at: datetime, now: datetime) -> str | None:
    if not ChannelHealth.objects.filter(channel=channel, state=ChannelHealth.State.OPEN, opened_at=opened_at).update(
            state=ChannelHealth.State.CLOSED, opened_at=None, changed_at=now):
        return None
    logger.warning("channel %s: circuit closed after %d successful probes", channel.code,
                   settings.CHANNEL_BREAKER_CLOSE_AFTER)
    return "closed"


def channel_sendable(channel: Channel, *, now: datetime | None = None) -> bool:
    """Whether an order already on the channel may be sent to it now: not while its circuit is open and cooling
    down (half-open lets the orders already on it through: they are its probes)."""
    return channel_state(channel.pk, now=now) != OPEN


# --- the route's choice -----------------------------------------------------------------------------------------


def route_choose(candidates: list[Candidate], *, now: datetime | None = None,
                 fallback: bool = True) -> tuple[Channel, str] | None:
    """The best available channel among those that serve the order (in priority order) and why; by weight among
    equal priorities. When none is available: with `fallback` the first one (the order waits for it) with the
    reason, else None."""
    if not candidates:
        return None
    now = now or timezone.now()
    skipped = []
    for priority, group in groupby(candidates, key=lambda c: c.channel.priority):
        group = list(group)
        available = [c for c in group if candidate_available(c, now)]
        if available:
            chosen = (available[0] if len(available) == 1 else
                      random.choices(available, weights=[max(c.channel.weight, 1) for c in available])[0])
            reason = f"priority {priority}"
            if len(available) > 1:
                reason += f", weight {chosen.channel.weight} of {sum(c.channel.weight for c in available)}"
            if chosen.state(now) == HALF_OPEN:
                reason += f", probe of {chosen.channel.code} (half-open)"
            if skipped:
                reason = f"failover: {'; '.join(skipped)}; {reason}"
            return chosen.channel, reason[:255]
        skipped.extend(f"{c.channel.code} circuit {c.state(now)}" for c in group)
    if not fallback:
        return None
    return candidates[0].channel, f"no healthy channel ({'; '.join(skipped)}): waits for {candidates[0].channel.code}"[:255]
