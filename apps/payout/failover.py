"""Sending a PROCESSING payout to its channel, and moving it to another one only when the first definitely did not
take it (docs/channels.md, "Failover"): never paid twice.

A payout may leave its channel when
  - it was never sent there (its circuit is open at the first submission), or
  - every attempt there was declined (UpstreamDeclined: the request never left, or was refused as a whole), which
    `channel_declined_at` records, or
  - the channel, asked by our idempotency key at least CHANNEL_FAILOVER_LOOKUP_AFTER_SECONDS after the submission
    (PayoutAdapter.disbursement_lookup), holds nothing.
After an ambiguous outcome (a timeout, a 5xx: UpstreamUnavailable) it stays where it is, PROCESSING with its funds
frozen: the sweeper sends it again with the same key, reconciliation resolves it. Every outcome feeds the channel's
circuit breaker (apps.channels.health). Adapter-agnostic: only the result types of apps.channels.base are read.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.channels.base import UpstreamDeclined, UpstreamUnavailable
from apps.channels.health import breaker_record, channel_sendable
from apps.channels.models import Channel
from apps.channels.registry import payout_adapter
from apps.channels.routing import route_next
from apps.channels.submission import one_submission_at_a_time
from apps.common import audit
from apps.common.retry import retry_conflicts
from apps.payout.models import Payout

logger = logging.getLogger(__name__)


# Turns of a send (each a move to another channel), and the lease renewed before each for that turn's channel: its
# adapter's send_calls HTTP timeouts (PayMongo: the lookup's pages, wallets, create, the lookup's pages again), so a
# sender killed mid-send frees the payout within one turn of that channel, not of the slowest one.
MOVES = 8


def payout_send(*, payout: Payout, first: bool) -> Payout:
    """Hand a PROCESSING payout without an upstream reference to its channel's adapter, outside any transaction,
    failing over as the module says. `first`: nothing was sent for it yet (payout_submit's first submission).
    Raises UpstreamUnavailable when it was not taken and stays where it is (the sweeper sends it again).

    One worker at a time sends a given payout (apps.channels.submission): two senders at once (a submission task
    and the sweeper's re-submission) could otherwise each reach a different upstream, one clearing the "declined"
    mark while its request is in flight and the other moving the payout on the strength of its own refusal. The
    second sender does not wait: it raises UpstreamUnavailable and the sweeper sends the payout again later, when it
    sees what the first did."""
    with one_submission_at_a_time(f"send:{payout.platform_order_no}",
                                  calls=payout_adapter(payout.channel).send_calls, wait=False) as renew:
        payout.refresh_from_db(fields=["status", "upstream_reference", "channel", "channel_declined_at",
                                       "submitted_at", "route_reason"])
        if payout.status != Payout.Status.PROCESSING or payout.upstream_reference:
            return payout  # answered, or taken by the sender before us
        return _payout_send_leased(payout=payout, first=first, renew=renew)


def _payout_send_leased(*, payout: Payout, first: bool, renew) -> Payout:
    for _ in range(MOVES):
        channel = payout.channel
        renew(payout_adapter(channel).send_calls)  # each turn moves the payout to another channel: a bound
        if not channel_sendable(channel):
            movable = first or payout.channel_declined_at is not None or _nothing_there(payout)
            if first:
                _declined(payout)  # never sent there: whenever it may move later, it may
            moved = _payout_move(payout, because=f"{channel.code} circuit open") if movable else None
            if moved is None:
                raise UpstreamUnavailable(f"payout {payout}: channel {channel.code} circuit open; "
                                          f"{'no healthy channel to move to' if movable else 'may have taken it'}")
            payout, first = moved, True
            continue
        declined_before = first or payout.channel_declined_at is not None
        if payout.channel_declined_at is not None:
            # This attempt may be taken: until it is known declined, the payout may not move.
            Payout.objects.filter(pk=payout.pk).update(channel_declined_at=None)
            payout.channel_declined_at = None
        try:
            reference = payout_adapter(channel).start_disbursement(payout=payout)
        except UpstreamDeclined as exc:
            breaker_record(channel=channel, ok=False, reason=str(exc))
            if not declined_before:
                raise  # an earlier attempt here was ambiguous: this refusal proves nothing about it
            _declined(payout)
            moved = _payout_move(payout, because=f"{channel.code} declined: {exc}")
            if moved is None:
                raise
            payout, first = moved, True
            continue
        except UpstreamUnavailable as exc:
            breaker_record(channel=channel, ok=False, reason=str(exc))
            raise
        breaker_record(channel=channel, ok=True)  # an answer, a refusal of the payee's account included
        # Only these columns: a concurrent channel result may already have moved the status. The reference is bound
        # with the channel that answered it, so that reconciliation and webhooks ask the upstream that holds it: a
        # concurrent worker may have moved the payout meanwhile (its move saw no reference yet); then the payout is
        # the disbursement this channel took, put back on it, and an operator is told (the other worker's own
        # submission, if it made one, finds the reference bound and binds nothing).
        current_channel = Payout.objects.filter(pk=payout.pk).values_list("channel_id", flat=True).first()
        bound = Payout.objects.filter(pk=payout.pk, upstream_reference="").update(upstream_reference=reference,
                                                                                 channel=channel)
        if bound and reference and current_channel != channel.pk:
            logger.error("payout %s: %s took it as %s after it had moved to channel %s; bound to %s, the channel that "
                         "holds it; an operator must check the other channel", payout, channel.code, reference,
                         current_channel, channel.code)
            audit.record(actor=None, actor_label="system", action="payout.failover", obj=payout,
                         old={"channel_id": current_channel}, new={"channel": channel.code},
                         reason=f"{channel.code} took it as {reference}")
        payout.upstream_reference = reference
        logger.info("payout %s submitted to %s as %s", payout, channel.code, reference)
        return payout
    raise UpstreamUnavailable(f"payout {payout}: moved too often; left on {payout.channel.code}")


def _declined(payout: Payout) -> None:
    now = timezone.now()
    Payout.objects.filter(pk=payout.pk, channel=payout.channel, upstream_reference="").update(channel_declined_at=now)
    payout.channel_declined_at = now


def _nothing_there(payout: Payout) -> bool:
    """Whether the channel, asked by our key long enough after the submission, holds no disbursement of ours."""
    waited = timezone.now() - payout.submitted_at >= timedelta(seconds=settings.CHANNEL_FAILOVER_LOOKUP_AFTER_SECONDS)
    if not waited:
        return False
    try:
        state = payout_adapter(payout.channel).disbursement_lookup(payout=payout)
    except UpstreamUnavailable as exc:
        # Unknown (no answer, or a list not read to its end: LookupUnknown) is never "nothing there".
        logger.warning("payout %s: %s could not say whether it holds it (%s); it waits", payout, payout.channel.code,
                       exc)
        return False
    if state.outcome != "missing":
        logger.warning("payout %s: %s holds %s (%s); it stays there", payout, payout.channel.code, state.reference,
                       state.upstream_status)
        return False
    _declined(payout)
    return True


@retry_conflicts
@transaction.atomic(durable=True)
def _payout_move_locked(*, payout_id: int, from_channel_id: int, to: Channel, reason: str) -> Payout | None:
    from apps.payout.services import lock_payout

    payout = lock_payout(payout_id=payout_id)
    if (payout.status != Payout.Status.PROCESSING or payout.upstream_reference
            or payout.channel_id != from_channel_id):
        return None  # answered, finished or moved meanwhile: nothing to do
    old = payout.channel.code
    payout.channel, payout.route_reason = to, reason
    payout.channel_declined_at, payout.submitted_at = None, timezone.now()
    payout.save(update_fields=["channel", "route_reason", "channel_declined_at", "submitted_at", "updated_at"])
    audit.record(actor=None, actor_label="system", action="payout.failover", obj=payout,
                 old={"channel": old}, new={"channel": to.code}, reason=reason)
    return payout


def _payout_move(payout: Payout, *, because: str) -> Payout | None:
    """The payout on the best healthy other channel that serves it, or None when there is none."""
    chosen = route_next(currency=payout.currency_id, direction=Channel.Direction.PAYOUT, amount=payout.amount,
                        bank_code=payout.bank_code, exclude={payout.channel_id}, because=because)
    if chosen is None:
        return None
    channel, reason = chosen
    moved = _payout_move_locked(payout_id=payout.pk, from_channel_id=payout.channel_id, to=channel, reason=reason)
    if moved is None:
        return None
    logger.warning("payout %s moved from %s to %s (%s)", payout, payout.channel.code, channel.code, reason)
    moved.currency = payout.currency
    return moved
