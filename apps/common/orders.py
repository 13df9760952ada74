"""Rules shared by collection and payout orders: merchant-scoped lookup and idempotent create (contract §3)."""

from django.db.models import Model, QuerySet

from apps.common.errors import DomainError, ErrorCode


def order_lookup(orders: QuerySet, *, platform_order_no: str | None = None,
                 mch_order_no: str | None = None) -> Model | None:
    """One order of an already merchant-scoped queryset; platform_order_no wins when both are given."""
    if platform_order_no:
        return orders.filter(platform_order_no=platform_order_no).first()
    if mch_order_no:
        return orders.filter(mch_order_no=mch_order_no).first()
    return None


def replay_or_conflict(order: Model, *, stored: dict, request: dict) -> Model:
    """Identical business parameters return the original order; any difference is 2001, naming the fields."""
    different = sorted(field for field, value in stored.items() if request[field] != value)
    if different:
        raise DomainError(ErrorCode.DUPLICATE_ORDER,
                          f"mch_order_no {order.mch_order_no} was already used with a different {', '.join(different)}.")
    return order
