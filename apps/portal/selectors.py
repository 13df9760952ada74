"""Portal reads, every one scoped to one merchant (`merchant_id` is always a filter, never optional)."""

import base64
from dataclasses import dataclass, field
from datetime import date, datetime

from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone

from apps.callbacks.models import CallbackEvent
from apps.common.independence import independence_conflict
from apps.collection.models import CollectionOrder
from apps.ledger.selectors import merchant_balances
from apps.currencies.formatting import format_minor
from apps.ledger.statements import day_bounds, settlement_zone, statement_today
from apps.merchants.models import MerchantCurrency
from apps.payout.models import Payout
from apps.portal.models import MerchantUser, Role

PAGE_SIZE = 50
EXPORT_MAX_ROWS = 100_000  # a CSV export stops there (its last line says so)


# --- home ----------------------------------------------------------------------------------------------------------

def merchant_currencies(*, merchant_id: int) -> list[str]:
    """The merchant's currencies, enabled now or once (their history stays readable), in code order."""
    return list(MerchantCurrency.objects.filter(merchant_id=merchant_id).order_by("currency_id")
                .values_list("currency_id", flat=True))


def balances(*, merchant_id: int) -> list[dict]:
    """available and settling per currency of the merchant (the ledger's cached balances; frozen is not shown, as on
    the balance API)."""
    rows = []
    for currency in merchant_currencies(merchant_id=merchant_id):
        figures = merchant_balances(merchant_id=merchant_id, currency=currency)
        rows.append({"currency": currency, "available": figures["available"], "settling": figures["settling"]})
    return rows


def _today_counts(queryset, *, statuses: list[str], start: datetime, end: datetime) -> list[dict]:
    aggregates = {"n_all": Count("*"), "sum_all": Sum("amount")}
    for status in statuses:
        aggregates[f"n_{status}"] = Count("pk", filter=Q(status=status))
        aggregates[f"sum_{status}"] = Sum("amount", filter=Q(status=status))
    rows = (queryset.order_by().filter(created_at__gte=start, created_at__lt=end).values("currency_id")
            .annotate(**aggregates).order_by("currency_id"))
    return [{"currency": row["currency_id"], "count": row["n_all"], "amount": row["sum_all"] or 0,
             "by_status": [{"status": status, "count": row[f"n_{status}"],
                            "amount": row[f"sum_{status}"] or 0} for status in statuses]} for row in rows]


def today(*, merchant_id: int, now: datetime | None = None) -> dict:
    """Today's pay-ins and payouts of the merchant, by currency and status: today is the Manila day
    (SETTLEMENT_TIME_ZONE), as settlement and statements count it, by the order's creation time."""
    day = statement_today(now)
    start, end = day_bounds(day)
    payouts = _today_counts(Payout.objects.filter(merchant_id=merchant_id), start=start, end=end,
                            statuses=[s.value for s in Payout.Status])
    # A reversed payout is SUCCESS with reversed_at: counted apart, never as plainly paid.
    reversed_ = dict(Payout.objects.order_by().filter(merchant_id=merchant_id, created_at__gte=start,
                                                      created_at__lt=end, reversed_at__isnull=False)
                     .values("currency_id").annotate(n=Count("*")).values_list("currency_id", "n"))
    for row in payouts:
        row["reversed"] = reversed_.get(row["currency"], 0)
    return {"day": day, "payins": _today_counts(CollectionOrder.objects.filter(merchant_id=merchant_id),
                                                 start=start, end=end,
                                                 statuses=[s.value for s in CollectionOrder.Status]),
            "payouts": payouts}


# "Orders waiting for the merchant" on the home page: each entry is a function (merchant_user) -> dict with
# label, count, url, or None when there is nothing to show (payouts by hand add "payouts awaiting your approval").
WAITING_SECTIONS: list = []


# --- the merchant's owners (docs/portal.md, "Maker-checker and independence") -------------------------------------

def independent_owners(*, merchant_id: int, of_user) -> list:
    """The merchant's active owners who are independent of `of_user` (apps.common.independence): the people who may
    check what `of_user` made. Empty: only our staff can give the merchant a second owner."""
    owners = (MerchantUser.objects.select_related("user")
              .filter(merchant_id=merchant_id, role=Role.OWNER, is_active=True, user__is_active=True)
              .exclude(user_id=of_user.pk).order_by("user__username"))
    return [owner for owner in owners if not independence_conflict(of_user, owner.user)]


def waiting_for_merchant(merchant_user) -> list[dict]:
    return [item for section in WAITING_SECTIONS if (item := section(merchant_user))]


# --- lists ---------------------------------------------------------------------------------------------------------

@dataclass
class OrderFilter:
    status: str = ""
    currency: str = ""
    date_from: date | None = None  # Manila days, inclusive, on the order's creation time
    date_to: date | None = None
    number: str = ""  # either order number: mch_order_no or platform_order_no, exactly
    errors: list[str] = field(default_factory=list)

    def query_string(self) -> str:
        from urllib.parse import urlencode

        return urlencode({key: value for key, value in (
            ("status", self.status), ("currency", self.currency),
            ("from", self.date_from.isoformat() if self.date_from else ""),
            ("to", self.date_to.isoformat() if self.date_to else ""), ("q", self.number)) if value})


def parse_filter(params, *, statuses: list[str], currencies: list[str]) -> OrderFilter:
    """The list's filter from the query string; a value that is not one of the choices is dropped, with a note."""
    found = OrderFilter()
    status = params.get("status", "").strip().upper()
    if status:
        if status in statuses or status == "REVERSED" and "SUCCESS" in statuses and "FROZEN" in statuses:
            found.status = status
        else:
            found.errors.append(f"unknown status {status}")
    currency = params.get("currency", "").strip().upper()
    if currency:
        if currency in currencies:
            found.currency = currency
        else:
            found.errors.append(f"unknown currency {currency}")
    for key, attr in (("from", "date_from"), ("to", "date_to")):
        value = params.get(key, "").strip()
        if value:
            try:
                setattr(found, attr, date.fromisoformat(value))
            except ValueError:
                found.errors.append(f"{key}: not a date (YYYY-MM-DD)")
    found.number = params.get("q", "").strip()[:64]
    return found


def order_numbers(number: str) -> Q:
    """An order found by either of its numbers, exactly."""
    return Q(mch_order_no=number) | Q(platform_order_no=number)


def filtered(queryset: QuerySet, merchant_id: int, flt: OrderFilter, *, numbers=order_numbers) -> QuerySet:
    """A list of the merchant's rows with `created_at`, `status` and `currency` (orders, refunds) filtered by `flt`,
    newest first; `numbers(text)` is the condition the number box stands for."""
    queryset = queryset.filter(merchant_id=merchant_id)
    if flt.status == "REVERSED":
        queryset = queryset.filter(reversed_at__isnull=False)
    elif flt.status:
        queryset = queryset.filter(status=flt.status)
    if flt.currency:
        queryset = queryset.filter(currency_id=flt.currency)
    if flt.date_from:
        queryset = queryset.filter(created_at__gte=day_bounds(flt.date_from)[0])
    if flt.date_to:
        queryset = queryset.filter(created_at__lt=day_bounds(flt.date_to)[1])
    if flt.number:
        queryset = queryset.filter(numbers(flt.number))
    return queryset.order_by("-created_at", "-id")


def payins(*, merchant_id: int, flt: OrderFilter) -> QuerySet:
    return filtered(CollectionOrder.objects.select_related("currency"), merchant_id, flt)


def payouts(*, merchant_id: int, flt: OrderFilter) -> QuerySet:
    return filtered(Payout.objects.select_related("currency"), merchant_id, flt)


def encode_cursor(order) -> str:
    raw = f"{order.created_at.isoformat()}|{order.pk}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int] | None:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        moment, pk = raw.split("|")
        parsed = datetime.fromisoformat(moment)
        return (parsed if parsed.tzinfo else timezone.make_aware(parsed)), int(pk)
    except (ValueError, UnicodeDecodeError):
        return None


def page_queryset(queryset: QuerySet, *, cursor: str = "") -> QuerySet:
    """The rows after `cursor` (a bad cursor: from the start)."""
    after = decode_cursor(cursor) if cursor else None
    if after is None:
        return queryset
    moment, pk = after
    return queryset.filter(Q(created_at__lt=moment) | Q(created_at=moment, pk__lt=pk))


def page(queryset: QuerySet, *, cursor: str = "", size: int | None = None) -> tuple[list, str]:
    """One page of a list ordered newest first, after `cursor` (keyset: created_at, id; no OFFSET, so a page costs the
    same however deep), and the cursor of the next page ('' at the end)."""
    size = size or PAGE_SIZE
    rows = list(page_queryset(queryset, cursor=cursor)[:size + 1])
    more = len(rows) > size
    rows = rows[:size]
    return rows, encode_cursor(rows[-1]) if more else ""


# --- one order -----------------------------------------------------------------------------------------------------

def payin_get(*, merchant_id: int, platform_order_no: str) -> CollectionOrder | None:
    return (CollectionOrder.objects.select_related("currency", "product")
            .filter(merchant_id=merchant_id, platform_order_no=platform_order_no).first())


def payout_get(*, merchant_id: int, platform_order_no: str) -> Payout | None:
    return (Payout.objects.select_related("currency", "product")
            .filter(merchant_id=merchant_id, platform_order_no=platform_order_no).first())


def order_callbacks(*, merchant_id: int, platform_order_no: str) -> list[CallbackEvent]:
    """The order's callback events, each with every attempt (oldest first)."""
    return list(CallbackEvent.objects.filter(merchant_id=merchant_id, platform_order_no=platform_order_no)
                .prefetch_related("attempts").order_by("created_at", "pk"))


def payin_history(order: CollectionOrder) -> list[tuple[datetime, str, str]]:
    """(when, state, note) of a pay-in, oldest first, from its timestamps; a time in a note is Manila time, as every
    time the portal shows."""
    open_until = order.expire_at.astimezone(settlement_zone())
    steps = [(order.created_at, "CREATED", f"pay page open until {open_until:%Y-%m-%d %H:%M}")]
    if order.paid_at:
        steps.append((order.paid_at, "SUCCESS", "paid by the payer"))
    if order.settled_at:
        steps.append((order.settled_at, "SETTLED", "net amount moved from settling to available (D1)"))
    if order.status == CollectionOrder.Status.EXPIRED:
        steps.append((order.expire_at, "EXPIRED", "not paid in time"))
    return sorted(steps, key=lambda step: step[0])


def payout_history(payout: Payout) -> list[tuple[datetime, str, str]]:
    """(when, state, note) of a payout, oldest first, from its timestamps and review decisions (our staff's internal
    reasons are not shown; the merchant sees that a review happened and its outcome)."""
    steps = [(payout.created_at, "CREATED", "amount and fee frozen")]
    if payout.review_required:
        steps.append((payout.created_at, "FROZEN", "held for review"))
    for approval in payout.approvals.order_by("created_at", "pk"):
        steps.append((approval.created_at, "APPROVED" if approval.decision == "APPROVE" else "REJECTED",
                      "review decision"))
    if payout.submitted_at:
        steps.append((payout.submitted_at, "PROCESSING", "sent to the bank channel"))
    if payout.finished_at:
        note = payout.fail_reason if payout.status in (Payout.Status.FAILED, Payout.Status.REJECTED) else ""
        steps.append((payout.finished_at, payout.status, note))
    if payout.reversed_at:
        steps.append((payout.reversed_at, "REVERSED", f"{format_minor(payout.reversal_amount, payout.currency)} returned by the bank"))
    return sorted(steps, key=lambda step: step[0])
