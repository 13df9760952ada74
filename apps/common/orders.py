"""Rules shared by collection and payout orders: merchant-scoped lookup and idempotent create (docs/api.md,
"Idempotent create")."""

from collections.abc import Callable

from django.db import IntegrityError
from django.db.models import Model, QuerySet

from apps.common.errors import DomainError, ErrorCode


def order_lookup(orders: QuerySet, *, platform_order_no: str | None = None,
                 mch_order_no: str | None = None) -> Model | None:
    """One order of an already merchant-scoped queryset; platform_order_no wins when both are given. No ORDER BY:
    each key matches one row (unique constraints), and the sort cost pay/query a share of its CPU
    (docs/performance.md, "Measured changes")."""
    if platform_order_no:
        return order_by_key(orders, platform_order_no=platform_order_no)
    if mch_order_no:
        return order_by_key(orders, mch_order_no=mch_order_no)
    return None


def order_by_key(orders: QuerySet, **unique_key) -> Model | None:
    """The one row of `orders` with that unique key, or None: `LIMIT 1` and no ORDER BY (`first()` would sort by the
    primary key, a cost with nothing to sort; docs/performance.md, "Measured changes")."""
    return next(iter(orders.filter(**unique_key).order_by()[:1]), None)


def replay_or_conflict(order: Model, *, stored: dict, request: dict) -> Model:
    """Identical business parameters return the original order; any difference is 2001, naming the fields."""
    different = sorted(field for field, value in stored.items() if request[field] != value)
    if different:
        raise DomainError(ErrorCode.DUPLICATE_ORDER,
                          f"mch_order_no {order.mch_order_no} was already used with a different {', '.join(different)}.")
    return order


def order_create_or_replay(*, lookup: Callable[[], Model | None], replay: Callable[[Model], Model],
                           create: Callable[[], Model]) -> Model:
    """docs/api.md, "Idempotent create": an mch_order_no already used is answered (identical parameters replay the
    order, different ones are 2001) before any business check.

    `create` checks and inserts in its own transaction. The usual case, a new mch_order_no, pays for no lookup
    (a third of pay/create's database time, docs/performance.md): an existing order can only make `create` fail,
    on a business check (1001, 1002, 1003, 2006, 2003) or on the (merchant, mch_order_no) unique constraint (a
    replay, or a concurrent create that committed first), and only then is it looked up."""
    try:
        return create()
    except (DomainError, IntegrityError):
        existing = lookup()
        if existing is None:
            raise
        return replay(existing)
