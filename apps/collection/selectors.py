"""Reads of collection orders. Every merchant-facing read is scoped to the authenticated merchant."""

from collections.abc import Sequence
from datetime import datetime

from django.db.models import QuerySet

from apps.collection.models import CollectionOrder, Refund
from apps.common.orders import order_by_key, order_lookup


def collection_order_for_merchant(*, merchant_id: int, platform_order_no: str | None = None,
                                  mch_order_no: str | None = None,
                                  fields: Sequence[str] | None = None) -> CollectionOrder | None:
    """The merchant's order by platform_order_no (preferred when both are given) or mch_order_no: the order's columns
    only (pay/query answers from them; a replay's product is read when it is needed), no ORDER BY (each key matches
    one row). The joins and the ordering were half of pay/query's CPU (docs/performance.md). `fields`: only these
    columns (pay/query's answer): compiling and loading all 24 was a further 0.2 ms (docs/performance.md, "Measured
    changes")."""
    orders = CollectionOrder.objects.filter(merchant_id=merchant_id)
    if fields is not None:
        orders = orders.only(*fields)
    return order_lookup(orders, platform_order_no=platform_order_no, mch_order_no=mch_order_no)


def collection_order_by_pay_token(*, pay_token: str) -> CollectionOrder | None:
    return (
        CollectionOrder.objects.select_related("merchant", "currency", "channel")
        .filter(pay_token=pay_token)
        .first()
    )


def collection_orders_due_for_expiry(*, now: datetime, limit: int = 1000) -> list[int]:
    return list(
        CollectionOrder.objects.filter(status=CollectionOrder.Status.CREATED, expire_at__lte=now)
        .order_by("expire_at")
        .values_list("pk", flat=True)[:limit]
    )


def collection_orders_due_for_release(*, cutoff: datetime) -> QuerySet:
    """Successful D1 orders paid before the cutoff whose settling credit is not yet released."""
    return CollectionOrder.objects.filter(
        settlement="D1", status=CollectionOrder.Status.SUCCESS, settled_at__isnull=True, paid_at__lt=cutoff
    ).order_by("paid_at", "pk")


def settlement_pending_by_currency() -> dict[str, dict[str, int]]:
    """Successful D1 orders not yet released, count and amount per currency (the partial index
    collection_settlement_due_idx holds exactly these rows): for /metrics and the operations overview."""
    from django.db.models import Count, Sum

    return {row["currency_id"]: {"count": row["n"], "amount": row["total"] or 0}
            for row in (CollectionOrder.objects.order_by()
                        .filter(settlement="D1", status=CollectionOrder.Status.SUCCESS, settled_at__isnull=True)
                        .values("currency_id").annotate(n=Count("*"), total=Sum("amount")))}


def refund_for_merchant(*, merchant_id: int, mch_refund_no: str | None = None,
                        refund_no: str | None = None) -> Refund | None:
    """The merchant's refund by refund_no (preferred when both are given) or mch_refund_no, with its pay-in."""
    refunds = Refund.objects.filter(merchant_id=merchant_id).select_related("order")
    if refund_no:
        return order_by_key(refunds, refund_no=refund_no)
    if mch_refund_no:
        return order_by_key(refunds, mch_refund_no=mch_refund_no)
    return None
