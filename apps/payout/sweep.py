"""The payout sweeper (beat, every 15 s; docs/payouts.md, "Stranded payouts"): finds every payout whose next step
died and hands it to the same service that step runs, and counts the ones no sweep can finish.

Each finisher is idempotent under the payout's row lock (the services return early when the order is already where
the step puts it), so a sweep that overlaps the step it stands in for, or another sweep, moves nothing twice.
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from apps.channels.models import Channel
from apps.channels.registry import allowed_adapter_names, payout_adapter, upstream_adapter_names
from apps.channels.selectors import sandbox_payouts_returned
from apps.common.stranded import STRANDED_FINISHED, StrandedKind
from apps.ledger.models import Hold
from apps.payout import services
from apps.payout.models import Payout
from apps.payout.upstream import payout_upstream_apply

logger = logging.getLogger(__name__)

# --- when a payout's next step is overdue (each is a named constant; docs/payouts.md lists them) -------------------

# An APPROVED order leaves for PROCESSING within a second (submit_payout, queued on commit); one still APPROVED
# after this lost its dispatch (broker down at commit, worker lost) and is queued again.
SUBMIT_GRACE = timedelta(seconds=10)
# A PROCESSING order the adapter never acknowledged (no upstream reference) is submitted again after
# services.RESUBMIT_AFTER (60 s), with the same idempotency key.
# The sandbox bank answers SANDBOX_PAYOUT_SETTLE_SECONDS after accepting a disbursement (and returns a ...4001 one
# SANDBOX_PAYOUT_RETURN_SECONDS later). A settle task retried on a deadlock finishes within seconds; one that has not
# answered this long after its answer was due was lost, and the sweeper asks the sandbox bank for the answer.
SANDBOX_ANSWER_GRACE = timedelta(seconds=60)
# How far back the sweeper looks for sandbox returns that were lost (the table of returned disbursements grows).
SANDBOX_RETURN_LOOKBACK = timedelta(days=7)
# A real upstream's PROCESSING payout is asked about by reconciliation once CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS
# have passed, every 5 minutes; still PROCESSING after two more runs, the upstream keeps saying pending (or does not
# answer): stranded, for an operator (reconciliation goes on asking).
UPSTREAM_RESOLVE_GRACE = timedelta(minutes=10)

SWEEP_LIMIT = 500  # orders per kind and sweep


def _sandbox_adapters() -> list[str]:
    """The sandbox payout adapters this deployment runs (none in a live one)."""
    return sorted(set(allowed_adapter_names(Channel.Direction.PAYOUT))
                  - set(upstream_adapter_names(Channel.Direction.PAYOUT)))


def _sandbox_answer_due(now: datetime, *, returned: bool = False) -> datetime:
    due = settings.SANDBOX_PAYOUT_SETTLE_SECONDS + (settings.SANDBOX_PAYOUT_RETURN_SECONDS if returned else 0)
    return now - timedelta(seconds=due) - SANDBOX_ANSWER_GRACE


def unsubmitted(now: datetime):
    return Payout.objects.filter(status=Payout.Status.APPROVED, updated_at__lt=now - SUBMIT_GRACE)


def unacknowledged(now: datetime):
    return Payout.objects.filter(status=Payout.Status.PROCESSING, upstream_reference="",
                                 submitted_at__lt=now - services.RESUBMIT_AFTER)


def sandbox_unanswered(now: datetime):
    return (Payout.objects.filter(status=Payout.Status.PROCESSING, channel__adapter__in=_sandbox_adapters(),
                                  submitted_at__lt=_sandbox_answer_due(now))
            .exclude(upstream_reference=""))


def sandbox_unreturned(now: datetime):
    returned = sandbox_payouts_returned(created_from=now - SANDBOX_RETURN_LOOKBACK,
                                        created_before=_sandbox_answer_due(now, returned=True))
    return Payout.objects.filter(status=Payout.Status.SUCCESS, reversed_at__isnull=True,
                                 channel__adapter__in=_sandbox_adapters(), platform_order_no__in=returned)


def upstream_unresolved(now: datetime):
    waited = timedelta(seconds=settings.CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS) + UPSTREAM_RESOLVE_GRACE
    return (Payout.objects.filter(status=Payout.Status.PROCESSING, submitted_at__lt=now - waited,
                                  channel__adapter__in=upstream_adapter_names(Channel.Direction.PAYOUT))
            .exclude(upstream_reference=""))


def terminal_hold_open(now: datetime):
    return Payout.objects.filter(hold__status=Hold.Status.HELD, status__in=Payout.TERMINAL)


STRANDED = [
    StrandedKind("payout.unsubmitted", "Approved, never submitted", "payout.payout", "updated_at", unsubmitted,
                 finisher="submit_payout queued again"),
    StrandedKind("payout.unacknowledged", "Processing, never acknowledged upstream", "payout.payout", "submitted_at",
                 unacknowledged, finisher="submitted again (same idempotency key)"),
    StrandedKind("payout.sandbox_unanswered", "Sandbox: settlement lost", "payout.payout", "submitted_at",
                 sandbox_unanswered, finisher="the sandbox bank's answer applied"),
    StrandedKind("payout.sandbox_unreturned", "Sandbox: return lost", "payout.payout", "finished_at",
                 sandbox_unreturned, finisher="the sandbox bank's return applied"),
    StrandedKind("payout.upstream_unresolved", "Upstream still undecided after reconciliation", "payout.payout",
                 "submitted_at", upstream_unresolved),
    StrandedKind("payout.terminal_hold_open", "Finished with its funds still frozen", "payout.payout", "finished_at",
                 terminal_hold_open, critical=True),
]
KINDS = {kind.name: kind for kind in STRANDED}


def _ids(kind_name: str, now: datetime) -> list[int]:
    return list(KINDS[kind_name].orders(now).order_by("created_at").values_list("pk", flat=True)[:SWEEP_LIMIT])


def _sandbox_answer_apply(payout_id: int) -> str | None:
    """Ask the sandbox bank what became of the disbursement and apply its answer as reconciliation applies a real
    upstream's (payout_upstream_apply: payout_channel_result / payout_channel_returned, the services the settle and
    return tasks call). Returns what changed."""
    payout = Payout.objects.select_related("channel").get(pk=payout_id)
    state = payout_adapter(payout.channel).payout_state(payout=payout)
    return payout_upstream_apply(platform_order_no=payout.platform_order_no, state=state,
                                 adapter=payout.channel.adapter)


def payouts_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Hand every stranded payout a sweep can finish to its next step; returns how many per kind. One order's
    failure is logged and does not stop the others (it is found again next run)."""
    now = now or timezone.now()
    handed = {}
    for kind_name, finish in (("payout.unsubmitted", lambda pk: services.payout_submit_dispatch(payout_id=pk)),
                              ("payout.unacknowledged", lambda pk: services.payout_submit_dispatch(payout_id=pk)),
                              ("payout.sandbox_unanswered", _sandbox_answer_apply),
                              ("payout.sandbox_unreturned", _sandbox_answer_apply)):
        ids = _ids(kind_name, now)
        for payout_id in ids:
            try:
                finish(payout_id)
            except Exception:  # noqa: BLE001 - one order's failure must not strand the others
                logger.exception("stranded payout %s (%s) not finished; tried again next sweep", payout_id, kind_name)
        if ids:
            STRANDED_FINISHED.labels(kind_name).inc(len(ids))
            logger.warning("%d stranded payouts (%s) handed to their next step", len(ids), kind_name)
            handed[kind_name] = len(ids)
    return handed
