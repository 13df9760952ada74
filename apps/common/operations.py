"""Reads of the operations overview (admin, on-call): the platform's state on one page.

Each figure is one index-friendly query (docs/performance.md, "Operations overview"): today's and the last 24 h's
orders are read through the covering created_at indexes (index-only scans: the queries count rows with COUNT(*) or
a column the index holds, never the id), the review queue through payout_status_created_idx, callbacks and pending
settlement through the selectors /metrics uses too.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Min, Q, Sum
from django.db.models.functions import TruncHour
from django.utils import timezone

from apps.common.models import Heartbeat

SWEEPERS = {"callbacks.sweeper": "Callback sweeper", "payout.sweeper": "Payout sweeper",
            "collection.settlement_release": "D1 settlement release"}


@dataclass
class Overview:
    now: datetime
    day_start: datetime
    payins: dict[str, dict[str, int]]  # currency -> count, amount, paid, paid_amount
    payouts: dict[str, dict[str, int]]  # currency -> count, amount, paid, paid_amount
    review_count: int
    review_oldest: datetime | None
    callbacks_due: int
    callbacks_dead: int
    settling: dict[str, dict[str, int]]  # currency -> count, amount
    heartbeats: list[tuple[str, datetime | None]]
    hourly: list[tuple[datetime, int, int]]  # hour, pay-ins, payouts (the last 24 h, oldest first)


def _today_by_currency(queryset, *, since: datetime, success: str) -> dict[str, dict[str, int]]:
    rows = (queryset.order_by().filter(created_at__gte=since).values("currency_id")
            .annotate(n=Count("*"), total=Sum("amount"), paid=Count("created_at", filter=Q(status=success)),
                      paid_total=Sum("amount", filter=Q(status=success))))
    return {row["currency_id"]: {"count": row["n"], "amount": row["total"] or 0, "paid": row["paid"],
                                 "paid_amount": row["paid_total"] or 0} for row in rows.order_by("currency_id")}


def _hourly(queryset, *, since: datetime) -> dict[datetime, int]:
    return {row["hour"]: row["n"] for row in (queryset.order_by().filter(created_at__gte=since)
                                              .annotate(hour=TruncHour("created_at")).values("hour")
                                              .annotate(n=Count("*")))}


def operations_overview(*, now: datetime | None = None) -> Overview:
    from apps.callbacks.selectors import callbacks_due_and_dead
    from apps.collection.models import CollectionOrder
    from apps.collection.selectors import settlement_pending_by_currency
    from apps.payout.models import Payout

    now = now or timezone.now()
    day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)  # UTC, like every time in the admin
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
        payins=_today_by_currency(CollectionOrder.objects, since=day_start, success=CollectionOrder.Status.SUCCESS),
        payouts=_today_by_currency(Payout.objects, since=day_start, success=Payout.Status.SUCCESS),
        review_count=queue["n"], review_oldest=queue["oldest"], callbacks_due=due, callbacks_dead=dead,
        settling=settlement_pending_by_currency(),
        heartbeats=[(label, beats.get(name)) for name, label in SWEEPERS.items()],
        hourly=[(hour, payin_hours.get(hour, 0), payout_hours.get(hour, 0)) for hour in hours],
    )


def hourly_chart_svg(hourly: list[tuple[datetime, int, int]], *, width: int = 720, height: int = 160) -> str:
    """The last 24 h as an inline SVG bar chart (pay-ins and payouts per hour), drawn on the server: no script,
    nothing loaded from anywhere. Returns markup built from numbers only."""
    pad_left, pad_bottom, pad_top = 36, 18, 8
    plot_w, plot_h = width - pad_left - 4, height - pad_bottom - pad_top
    peak = max([max(i, o) for _, i, o in hourly] + [1])
    slot = plot_w / max(len(hourly), 1)
    bar = max(slot / 2 - 1, 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} '
             f'{height}" role="img" aria-label="Orders per hour, last 24 hours" class="ops-chart">',
             f'<line x1="{pad_left}" y1="{pad_top + plot_h}" x2="{width - 4}" y2="{pad_top + plot_h}" '
             f'stroke="#999" stroke-width="1"/>',
             f'<text x="{pad_left - 4}" y="{pad_top + 8}" text-anchor="end" font-size="10" fill="#666">{peak}</text>',
             f'<text x="{pad_left - 4}" y="{pad_top + plot_h}" text-anchor="end" font-size="10" fill="#666">0</text>']
    for index, (hour, payins, payouts) in enumerate(hourly):
        x = pad_left + index * slot
        for offset, value, colour, label in ((0, payins, "#417690", "pay-ins"), (bar + 1, payouts, "#c0823a",
                                                                                  "payouts")):
            h = round(plot_h * value / peak, 1)
            parts.append(f'<rect x="{x + offset:.1f}" y="{pad_top + plot_h - h:.1f}" width="{bar:.1f}" '
                         f'height="{h}" fill="{colour}"><title>{hour:%H}:00 UTC: {value} {label}</title></rect>')
        if index % 3 == 0:
            parts.append(f'<text x="{x + bar:.1f}" y="{height - 4}" text-anchor="middle" font-size="10" '
                         f'fill="#666">{hour:%H}h</text>')
    parts.append("</svg>")
    return "".join(parts)
