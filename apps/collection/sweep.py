"""Stranded pay-ins (docs/collections.md, "Stranded pay-ins"): orders whose next step died.

  payin.unopened    a real upstream's payment (the Xendit invoice) never opened: the opening task was lost. The
                    sweeper (beat, every 15 s) queues it again; collection_upstream_open is idempotent per order.
  payin.unexpired   CREATED past expire_at: expire_due_orders (beat, every 10 s) finishes them; counted when it
                    has not for EXPIRY_GRACE.
  payin.unreleased  a D1 credit whose release day has come: release_settlement (beat, every 5 min) finishes them;
                    counted when it has not for RELEASE_GRACE after the cut-off.
  payin.upstream_unresolved
                    a real upstream's payment (paid or not?) still not known final UPSTREAM_RESOLVE_GRACE after the
                    order's expiry: reconciliation asks every 5 minutes and did not learn it. Counted, for an
                    operator; reconciliation goes on asking for CHANNEL_RECONCILE_PAYIN_WINDOW_SECONDS.
"""

import logging
from datetime import datetime, timedelta

from django.db.models import Exists, OuterRef
from django.utils import timezone

from apps.channels.models import Channel, UpstreamPayin
from apps.channels.registry import upstream_adapter_names
from apps.channels.selectors import upstream_payins_not_final
from apps.collection import services
from apps.collection.models import CollectionOrder, Refund
from apps.collection.refunds import REFUND_SWEEP_GRACE
from apps.common.stranded import STRANDED_FINISHED, StrandedKind

logger = logging.getLogger(__name__)

# pay/create queues the opening on commit and a worker opens the invoice within a second or two (an upstream that
# times out takes CHANNEL_HTTP_TIMEOUT_SECONDS, 15 s); none opened after this, the task was lost.
OPEN_GRACE = timedelta(seconds=30)
# The expiry task runs every 10 s: a CREATED order this long past expire_at was missed by several runs.
EXPIRY_GRACE = timedelta(minutes=1)
# The D1 release runs every 5 minutes: a credit still unreleased this long after its cut-off was missed by three.
RELEASE_GRACE = timedelta(minutes=15)
# Reconciliation asks about an expired order's upstream payment every 5 minutes: not known final after six runs, the
# upstream does not answer or says something we do not understand.
UPSTREAM_RESOLVE_GRACE = timedelta(minutes=30)

SWEEP_LIMIT = 500
SWEEPER_HEARTBEAT = "collection.sweeper"  # the operations overview shows its last run


def unopened(now: datetime):
    opened = UpstreamPayin.objects.filter(platform_order_no=OuterRef("platform_order_no"))
    return (CollectionOrder.objects.filter(status=CollectionOrder.Status.CREATED, expire_at__gt=now,
                                           created_at__lt=now - OPEN_GRACE,
                                           channel__adapter__in=upstream_adapter_names(Channel.Direction.PAYIN))
            .filter(~Exists(opened)))


def unexpired(now: datetime):
    return CollectionOrder.objects.filter(status=CollectionOrder.Status.CREATED, expire_at__lt=now - EXPIRY_GRACE)


def unreleased(now: datetime):
    return CollectionOrder.objects.filter(settlement="D1", status=CollectionOrder.Status.SUCCESS,
                                          settled_at__isnull=True,
                                          paid_at__lt=services.settlement_cutoff(now - RELEASE_GRACE))


def upstream_unresolved(now: datetime):
    return CollectionOrder.objects.filter(
        status__in=(CollectionOrder.Status.CREATED, CollectionOrder.Status.EXPIRED),
        expire_at__lt=now - UPSTREAM_RESOLVE_GRACE,
        platform_order_no__in=upstream_payins_not_final().values("platform_order_no"))


STRANDED = [
    StrandedKind("payin.unopened", "Upstream payment never opened", "collection.collectionorder", "created_at",
                 unopened, finisher="open_upstream_payin queued again"),
    StrandedKind("payin.unexpired", "Past expiry, not expired", "collection.collectionorder", "expire_at", unexpired,
                 finisher="expire_due_orders"),
    StrandedKind("payin.unreleased", "D1 credit not released on its day", "collection.collectionorder", "paid_at",
                 unreleased, finisher="release_settlement"),
    StrandedKind("payin.upstream_unresolved", "Upstream payment still unknown after expiry",
                 "collection.collectionorder", "expire_at", upstream_unresolved),
]
KINDS = {kind.name: kind for kind in STRANDED}


def refund_unanswered(now: datetime):
    """Refunds still PROCESSING REFUND_SWEEP_GRACE after they were made: the sandbox answers within seconds, so the
    submission or the answer was lost (refunds_sweep finishes them)."""
    return Refund.objects.filter(status=Refund.Status.PROCESSING, created_at__lt=now - REFUND_SWEEP_GRACE)


# Refunds' own kinds: their admin list is the refunds', not the pay-ins'.
REFUND_STRANDED = [
    StrandedKind("refund.unanswered", "Refund without its channel's answer", "collection.refund", "created_at",
                 refund_unanswered, finisher="sweep_stranded_payins (refunds_sweep)"),
]


def payins_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Queue the upstream opening of every pay-in whose opening task was lost; returns how many per kind. Expiry and
    the D1 release are periodic tasks of their own, which finish whatever is due at each run."""
    now = now or timezone.now()
    orders = list(unopened(now).select_related("channel").order_by("created_at")[:SWEEP_LIMIT])
    for order in orders:
        services.collection_upstream_open_dispatch(order=order)
    if not orders:
        return {}
    STRANDED_FINISHED.labels("payin.unopened").inc(len(orders))
    logger.warning("%d pay-ins without their upstream payment: opening queued again", len(orders))
    return {"payin.unopened": len(orders)}
