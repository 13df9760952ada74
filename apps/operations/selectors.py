"""Reads of the operations overview (admin, on-call): the platform's state on one page, from several domains.

Each figure is one index-friendly query (docs/performance.md, "Operations overview"): today's and the last 24 h's
orders are read through the covering created_at indexes (index-only scans: the queries count rows with COUNT(*) or
a column the index holds, never the id), the review queue through payout_status_created_idx, callbacks and pending
settlement through the selectors /metrics uses too. Stranded orders: one aggregate per kind, each over the rows a
partial index holds (orders still waiting for a step), shared with /metrics.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Min, Q, Sum
from django.db.models.functions import TruncHour
from django.utils import timezone

from apps.callbacks.selectors import callbacks_due_and_dead
from apps.collection import sweep as collection_sweep
from apps.collection.models import CollectionOrder
from apps.collection.selectors import settlement_pending_by_currency
from apps.collection.services import settlement_cutoff
from apps.common.models import Heartbeat
from apps.common.stranded import StrandedCount, stranded_count, stranded_kinds_registered
from apps.payout import sweep as payout_sweep
from apps.payout.models import Payout

SWEEPERS = {"callbacks.sweeper": "Callback sweeper", "payout.sweeper": "Payout sweeper",
            collection_sweep.SWEEPER_HEARTBEAT: "Pay-in sweeper", "collection.settlement_release": "D1 settlement release"}


@dataclass
class Overview:
    now: datetime
    day_start: datetime
    payins: dict[str, dict[str, int]]  # currency -> count, amount, paid, paid_amount
    payouts: dict[str, dict[str, int]]  # currency -> count, amount, paid, paid_amount (paid: not reversed)
    reversals: dict[str, dict[str, int]]  # currency -> count, amount, fee_refund: payouts reversed today
    review_count: int
    review_oldest: datetime | None
    callbacks_due: int
    callbacks_dead: int
    settling: dict[str, dict[str, int]]  # currency -> count, amount
    heartbeats: list[tuple[str, datetime | None]]
    hourly: list[tuple[datetime, int, int]]  # hour, pay-ins, payouts (the last 24 h, oldest first)
    stranded: list[StrandedCount]  # every kind, in the sweeps' order


def stranded_orders(*, now: datetime | None = None) -> list[StrandedCount]:
    """Orders whose next step died, per kind (apps/payout/sweep.py, apps/collection/sweep.py, and the kinds the apps
    above register: the portal's approved refunds): for the overview's tile and /metrics."""
    now = now or timezone.now()
    return [stranded_count(kind, now=now)
            for kind in payout_sweep.STRANDED + collection_sweep.STRANDED + collection_sweep.REFUND_STRANDED
            + stranded_kinds_registered()]


def _today_by_currency(queryset, *, since: datetime, paid: Q) -> dict[str, dict[str, int]]:
    rows = (queryset.order_by().filter(created_at__gte=since).values("currency_id")
            .annotate(n=Count("*"), total=Sum("amount"), paid=Count("created_at", filter=paid),
                      paid_total=Sum("amount", filter=paid)))
    return {row["currency_id"]: {"count": row["n"], "amount": row["total"] or 0, "paid": row["paid"],
                                 "paid_amount": row["paid_total"] or 0} for row in rows.order_by("currency_id")}


def _reversed_today(*, since: datetime) -> dict[str, dict[str, int]]:
    """Payouts reversed since the day's start (whenever they were paid), per currency: through the partial index
    payout_reversed_at_idx, which holds reversed payouts only."""
    rows = (Payout.objects.order_by().filter(reversed_at__gte=since).values("currency_id")
            .annotate(n=Count("*"), total=Sum("reversal_amount"), fees=Sum("fee_refund")))
    return {row["currency_id"]: {"count": row["n"], "amount": row["total"] or 0, "fee_refund": row["fees"] or 0}
            for row in rows.order_by("currency_id")}


def _payouts_today(*, since: datetime) -> dict[str, dict[str, int]]:
    """Today's payouts; a reversed payout stays SUCCESS (contract) but its money came back, so it is not counted as
    paid out. The sums stay index-only on payout_created_cover_idx; the reversed ones among them are subtracted,
    read through the small partial payout_reversed_at_idx."""
    figures = _today_by_currency(Payout.objects, since=since, paid=Q(status=Payout.Status.SUCCESS))
    reversed_rows = (Payout.objects.order_by().filter(reversed_at__isnull=False, created_at__gte=since)
                     .values("currency_id").annotate(n=Count("*"), total=Sum("amount")))
    for row in reversed_rows:
        figure = figures[row["currency_id"]]
        figure["paid"] -= row["n"]
        figure["paid_amount"] -= row["total"] or 0
    return figures


def _hourly(queryset, *, since: datetime) -> dict[datetime, int]:
    return {row["hour"]: row["n"] for row in (queryset.order_by().filter(created_at__gte=since)
                                              .annotate(hour=TruncHour("created_at")).values("hour")
                                              .annotate(n=Count("*")))}


def operations_overview(*, now: datetime | None = None) -> Overview:
    now = now or timezone.now()
    # "Today" is the settlement day (SETTLEMENT_TIME_ZONE, Asia/Manila), the day of D1 release and of the merchant's
    # statements, so the overview's "today" and a statement's day count the same orders.
    day_start = settlement_cutoff(now)
    queue = Payout.objects.order_by().filter(status=Payout.Status.FROZEN).aggregate(n=Count("*"),
                                                                                    oldest=Min("created_at"))
    due, dead = callbacks_due_and_dead(now=now)
    beats = dict(Heartbeat.objects.filter(name__in=SWEEPERS).values_list("name", "beat_at"))
    first_hour = (now - timedelta(hours=23)).replace(minute=0, second=0, microsecond=0)
    payin_hours = _hourly(CollectionOrder.objects, since=first_hour)
    payout_hours = _hourly(Payout.objects, since=first_hour)
    hours = [first_hour + timedelta(hours=i) for i in range(24)]
    return Overview(
        now=now, day_start=day_start,
        payins=_today_by_currency(CollectionOrder.objects, since=day_start,
                                  paid=Q(status=CollectionOrder.Status.SUCCESS)),
        payouts=_payouts_today(since=day_start),
        reversals=_reversed_today(since=day_start),
        review_count=queue["n"], review_oldest=queue["oldest"], callbacks_due=due, callbacks_dead=dead,
        settling=settlement_pending_by_currency(),
        heartbeats=[(label, beats.get(name)) for name, label in SWEEPERS.items()],
        hourly=[(hour, payin_hours.get(hour, 0), payout_hours.get(hour, 0)) for hour in hours],
        stranded=stranded_orders(now=now),
    )
