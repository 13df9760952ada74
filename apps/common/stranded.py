"""Stranded orders (docs/faults.md, "Stranded orders"): an order whose next step died (a lost task, a lost
dispatch, an upstream that never answered). Each domain's sweep (apps/payout/sweep.py, apps/collection/sweep.py)
names its kinds here; the operations overview and /metrics count them with one aggregate query per kind, over
partial conditions an index serves (only orders still waiting for a step are ever read)."""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.contrib import admin
from django.db.models import Count, Min, Q, QuerySet
from django.utils import timezone
from prometheus_client import Counter

# Age buckets of the stranded-orders gauge: an order stranded for a few minutes is a sweep about to act; one
# stranded for an hour is a sweep that cannot finish it (an operator's case).
AGE_BUCKETS = (("under_5m", timedelta(minutes=5)), ("5m_to_1h", timedelta(hours=1)), ("over_1h", None))

# Counted by the process that ran the sweep (every process's, summed, with PROMETHEUS_MULTIPROC_DIR).
STRANDED_FINISHED = Counter("payments_stuck_orders_handed", "Stuck orders a sweep handed to their next step, by kind.",
                            ["kind"])


@dataclass(frozen=True)
class StrandedKind:
    """One way an order can be stranded. `orders(now)` is the query of the orders stranded that way at `now` (the
    admin's filter and the counts use the same one); `since` is the field its age counts from."""

    name: str  # "payout.unanswered": the metric's label and the admin filter's value
    label: str  # what the operations overview says
    model: str  # the admin list that shows them: "payout.payout"
    since: str
    orders: Callable[[datetime], QuerySet] = field(compare=False)
    finisher: str = ""  # who finishes them; empty: nobody can, an operator must look (reported only)
    critical: bool = False  # an invariant broken: must never happen


@dataclass(frozen=True)
class StrandedCount:
    kind: StrandedKind
    count: int
    oldest: datetime | None
    ages: dict[str, int]  # AGE_BUCKETS name -> orders


# Kinds of the apps above the operations overview (the portal's approved refunds), which it cannot import: each
# registers its own from its AppConfig.ready(), and the overview and /metrics count them after the domains' kinds.
_REGISTERED: list[StrandedKind] = []


def stranded_kinds_register(kinds: list[StrandedKind]) -> None:
    """Called once from an AppConfig.ready()."""
    _REGISTERED.extend(kind for kind in kinds if kind not in _REGISTERED)


def stranded_kinds_registered() -> list[StrandedKind]:
    return list(_REGISTERED)


def stranded_count(kind: StrandedKind, *, now: datetime) -> StrandedCount:
    """How many orders are stranded that way, the oldest, and how many in each age bucket: one query."""
    # older[i]: the orders at least as old as bucket i's upper bound (so not in bucket i)
    bounds = {f"older_{i}": Count(kind.since, filter=Q(**{f"{kind.since}__lt": now - limit}))
              for i, (_, limit) in enumerate(AGE_BUCKETS) if limit is not None}
    row = kind.orders(now).order_by().aggregate(n=Count(kind.since), oldest=Min(kind.since), **bounds)
    ages, not_younger = {}, row["n"]
    for i, (name, _) in enumerate(AGE_BUCKETS):
        older = row.get(f"older_{i}", 0)
        ages[name] = not_younger - older
        not_younger = older
    return StrandedCount(kind=kind, count=row["n"], oldest=row["oldest"], ages=ages)


def stranded_list_filter(kinds: list[StrandedKind]) -> type[admin.SimpleListFilter]:
    """The admin list filter `?stranded=<kind>`: the orders stranded that way now, by the same query the counts use
    (the operations overview links each count to it)."""
    by_name = {kind.name: kind for kind in kinds}

    class StrandedFilter(admin.SimpleListFilter):
        title = "stranded"
        parameter_name = "stranded"

        def lookups(self, request, model_admin):
            return [(kind.name, kind.label) for kind in kinds]

        def queryset(self, request, queryset):
            kind = by_name.get(self.value())
            return queryset if kind is None else queryset.filter(pk__in=kind.orders(timezone.now()).values("pk"))

    return StrandedFilter
