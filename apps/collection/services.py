"""Writes of collection orders: create (idempotent), upstream payment notification, expiry, D1 release.

Lock order everywhere: the order row first (select_for_update), then the ledger (which locks its accounts
in primary-key order); docs/ledger.md, "Lock order and retries". Durable services retry a deadlock or
serialization failure (apps/common/retry.py). Callbacks are written to the outbox in the same transaction and
dispatched after commit by apps.callbacks.
"""

import logging
from contextlib import nullcontext
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Sum
from django.utils import timezone

from apps.callbacks.models import CallbackEvent
from apps.callbacks.enqueue import callback_enqueue, collection_success_payload
from apps.channels.base import UpstreamRejected, UpstreamUnavailable
from apps.channels.environment import SANDBOX, ChannelNotAllowed, platform_environment
from apps.channels.registry import payin_adapter, payin_adapters
from apps.channels.routing import order_route
from apps.channels.selectors import channel_cached
from apps.collection.models import DEFAULT_EXPIRE_SECONDS, CollectionOrder
from apps.collection.selectors import (
    collection_order_for_merchant,
    collection_orders_due_for_release,
)
from apps.common.connection_check import first_transaction_checks_connection
from apps.common.errors import DomainError, ErrorCode
from apps.common.models import Heartbeat, mark_saved
from apps.common.orders import order_by_key, order_create_or_replay, replay_or_conflict
from apps.common.refcache import GENERATION_SELECT, refcache_scope
from apps.common.retry import retry_conflicts
from apps.ledger import services as ledger
from apps.ledger.models import AccountKind
from apps.ledger.services import Leg
from apps.merchants.models import Merchant, Product
from apps.merchants.selectors import merchant_cached

logger = logging.getLogger(__name__)

POSTING_SUCCESS = "collection.success"
POSTING_RELEASE = "settlement.release"


# ---------------------------------------------------------------------------------------------- create

def _replay(order: CollectionOrder, request: dict) -> CollectionOrder:
    stored = {
        "product_code": order.product.code, "amount": order.amount, "currency": order.currency_id,
        "subject": order.subject, "return_url": order.return_url, "expire_seconds": order.expire_seconds,
        "attach": order.attach,
    }
    return replay_or_conflict(order, stored=stored, request=request)


def collection_create(*, merchant: Merchant, mch_order_no: str, product_code: str, amount: int, currency: str,
                      subject: str = "", return_url: str = "", expire_seconds: int = DEFAULT_EXPIRE_SECONDS,
                      attach: str = "") -> CollectionOrder:
    """A new CREATED order, or the existing one replayed when mch_order_no comes again with identical parameters."""
    request = {"product_code": product_code, "amount": amount, "currency": currency, "subject": subject,
               "return_url": return_url, "expire_seconds": expire_seconds, "attach": attach}

    def create() -> CollectionOrder:
        route = order_route(merchant_id=merchant.pk, kind=Product.Kind.COLLECTION, currency=currency,
                            product_code=product_code, amount=amount)
        fee = route.product.fee_for(amount)
        if fee >= amount:
            # Decision (docs/collections.md): a pay-in that would credit the merchant nothing is refused.
            raise DomainError(ErrorCode.AMOUNT_OUT_OF_RANGE, f"amount must exceed the product fee of {fee}.")
        # No money moves at create: one INSERT, committed by itself (autocommit: no BEGIN and COMMIT statements). A
        # unique conflict (the same mch_order_no committed concurrently) then leaves the connection usable for the
        # replay, as does the savepoint taken when a caller has a transaction open.
        # The related rows by their ids: the merchant's answer needs none of them, and assigning the instances (the
        # foreign keys' descriptors, then save()'s check of each cached instance) was ~5 % of the create's CPU
        # (docs/performance.md, "Measured changes"). A caller that reads order.merchant, .product or .channel loads it.
        order = CollectionOrder(
            merchant_id=merchant.pk, mch_order_no=mch_order_no, product_id=route.product.pk,
            settlement=route.product.settlement, channel_id=route.channel.pk, route_reason=route.reason,
            currency_id=currency, amount=amount,
            fee=fee, subject=subject, return_url=return_url, attach=attach, expire_seconds=expire_seconds,
            expire_at=timezone.now() + timedelta(seconds=expire_seconds),
        )
        with transaction.atomic() if transaction.get_connection().in_atomic_block else nullcontext():
            _order_insert(order)
            if _opens_upstream(route.channel):
                # A real upstream opens its payment (Xendit: the invoice) after commit; the sandbox opens nothing.
                order.channel = route.channel
                transaction.on_commit(lambda: collection_upstream_open_dispatch(order=order))
            return order

    return order_create_or_replay(
        lookup=lambda: collection_order_for_merchant(merchant_id=merchant.pk, mch_order_no=mch_order_no),
        replay=lambda existing: _replay(existing, request), create=create)


# pay/create's INSERT, a named query run through Django's cursor: the order is built by the model (its defaults drawn
# there: platform_order_no, pay_token, status), then inserted by this statement instead of `save()`, whose 22-column
# compile and field-by-field preparation cost 320 us of CPU against 190 us for this (micro-measured, alternated):
# about -130 us, 7-8 % of pay/create's app CPU (docs/performance.md, "Measured changes"). Every concrete column but the
# id, in the model's order (tests/collection/test_order_insert.py holds it to the model's fields).
_ORDER_INSERT = """INSERT INTO "collection_collectionorder" (
    merchant_id, platform_order_no, mch_order_no, product_id, settlement, channel_id, route_reason, currency_id,
    amount, fee, subject, return_url, attach, expire_seconds, status, expire_at, paid_at, settled_at, pay_token,
    upstream_reference, created_at, updated_at
) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
RETURNING id
"""


def _order_insert(order: CollectionOrder) -> CollectionOrder:
    """Insert a new order built in memory, as `save()` would (created_at and updated_at set now, the id read back);
    an IntegrityError as from `save()`. No signal is sent: no receiver listens to CollectionOrder's."""
    order.created_at = order.updated_at = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(_ORDER_INSERT, [
            order.merchant_id, order.platform_order_no, order.mch_order_no, order.product_id, order.settlement,
            order.channel_id, order.route_reason, order.currency_id, order.amount, order.fee, order.subject,
            order.return_url, order.attach, order.expire_seconds, str(order.status), order.expire_at, order.paid_at,
            order.settled_at, order.pay_token, order.upstream_reference, order.created_at, order.updated_at])
        order.pk = cursor.fetchone()[0]
    return mark_saved(order, connection.alias)


# ---------------------------------------------------------------------------------------------- upstream opening

def _opens_upstream(channel) -> bool:
    """Whether an order on this channel has an upstream payment to open: not on the sandbox, nor on an adapter this
    process does not know."""
    cls = payin_adapters().get(channel.adapter)
    return cls is not None and not getattr(cls, "is_sandbox", False)


def collection_upstream_open_dispatch(*, order: CollectionOrder) -> None:
    """After pay/create commits: a real upstream opens its payment (Xendit: the invoice) in a task, so pay/create
    answers without waiting for it. The sandbox opens nothing. A broker outage only delays it to the payer's first
    opening of pay_url, which opens it too (start_payment is idempotent per platform_order_no)."""
    if not _opens_upstream(order.channel):
        return
    from apps.collection.tasks import open_upstream_payin

    try:
        open_upstream_payin.delay(order.platform_order_no)
    except Exception:  # noqa: BLE001 - broker down: the pay page opens the payment when the payer comes
        logger.warning("pay-in %s: upstream opening not dispatched; the pay page will open it", order)


def collection_upstream_open(*, platform_order_no: str) -> str | None:
    """Open the order's upstream payment if it is still payable; its reference, or None when nothing was opened
    (paid, expired, a channel this deployment may not use, or the upstream not answering: the page tries again)."""
    order = (CollectionOrder.objects.select_related("channel", "currency", "merchant")
             .filter(platform_order_no=platform_order_no).first())
    if order is None or not order.is_payable():
        return None
    from apps.collection.failover import collection_payment_start

    try:  # on its channel, or the next one while none is open yet (docs/channels.md, "Failover")
        return collection_payment_start(order=order)[1].upstream_reference
    except (ChannelNotAllowed, UpstreamUnavailable, UpstreamRejected) as exc:
        logger.warning("pay-in %s: upstream payment not opened: %s", order, exc)
        return None


# ---------------------------------------------------------------------------------------------- paid

# The locking queryset, built once (as refcache's generation read): each lock clones it and adds its key's filter, so
# the statement is still built and compiled on every call. Building the `select_for_update` afresh was part of a
# quarter of the lock's CPU (docs/performance.md, "Measured changes").
_LOCKED = CollectionOrder.objects.select_for_update(of=("self",))


def _order_locked(**unique_key) -> CollectionOrder | None:
    """The order by one of its unique keys, `SELECT … FOR UPDATE`: the order's columns only, no join and no ORDER BY
    (the key matches one row). What a locked order needs of its merchant or channel comes from the reference cache
    (merchant_cached, channel_cached): building and compiling the joined statement was a fifth of the hosted Pay's
    CPU (docs/performance.md, "Measured changes")."""
    return order_by_key(_LOCKED, **unique_key)


# CollectionOrder's concrete fields in their order (tests/collection/test_pay_page.py holds them to the model): the
# select list of the locks written by hand below, each column named as its field's attname.
_ORDER_FIELDS = ("id", "merchant_id", "platform_order_no", "mch_order_no", "product_id", "settlement", "channel_id",
                 "route_reason", "currency_id", "amount", "fee", "subject", "return_url", "attach", "expire_seconds",
                 "status", "expire_at", "paid_at", "settled_at", "pay_token", "upstream_reference", "created_at",
                 "updated_at")

# The hosted Pay's one read of its order (the page's Pay by its pay_token, `collection_sandbox_pay`), written by hand
# (STYLE.md, "One database, one way"): the statement the ORM built from `_LOCKED` with the generation's subquery; its
# clone, filter, compile and row conversion cost 0.51-0.54 ms of CPU against 0.11-0.12 ms by hand (loaded host), about
# 8 % of the Pay's CPU, app and PostgreSQL (docs/performance.md, "Measured changes"). The columns are _ORDER_FIELDS,
# then the reference generation as refcache reads it (GENERATION_SELECT). The key matches one row
# (collection_pay_token_unique): no ORDER BY.
_PAY_LOCK_BY_TOKEN = (
    f"SELECT {', '.join(_ORDER_FIELDS)}, ({GENERATION_SELECT}) "
    "FROM \"collection_collectionorder\" WHERE pay_token = %s LIMIT 1 FOR UPDATE OF \"collection_collectionorder\"")


def _order_locked_by_pay_token(pay_token: str) -> tuple[CollectionOrder | None, int | None]:
    """The order of `pay_token` under its row lock (`SELECT … FOR UPDATE`) and the reference generation read by the
    same statement (for refcache_scope); (None, None) when no order has that token."""
    order, extra = _order_read_by_hand(_PAY_LOCK_BY_TOKEN, [pay_token])
    return order, (extra[0] if order is not None else None)


def _order_read_by_hand(sql: str, params: list) -> tuple[CollectionOrder | None, tuple]:
    """The order a hand-written statement selects (its first columns _ORDER_FIELDS) and the row's further columns;
    (None, ()) when it selects none."""
    connection = transaction.get_connection()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None, ()
    fields = len(_ORDER_FIELDS)
    return CollectionOrder.from_db(connection.alias, _ORDER_FIELDS, row[:fields]), tuple(row[fields:])


# refund/create's one read of its order: the merchant's order by the key the request names, under its row lock, in
# the refund's transaction (the lookup is the lock). Written by hand as the Pay's: the ORM's lock (`_order_locked`
# with the merchant's filter) took 0.89 ms of CPU, this 0.29 ms (micro, alternated), a sixth of refund/create's
# (docs/performance.md, "Measured changes"). Each key
# matches at most one row of the merchant (collection_platform_order_no_unique,
# collection_mch_order_no_unique): no ORDER BY.
_MERCHANT_ORDER_LOCK = ("SELECT " + ", ".join(_ORDER_FIELDS) + " FROM \"collection_collectionorder\" "
                        "WHERE merchant_id = %s AND {key} = %s LIMIT 1 FOR UPDATE")
_MERCHANT_ORDER_LOCK_BY = {key: _MERCHANT_ORDER_LOCK.format(key=key) for key in ("platform_order_no", "mch_order_no")}


def lock_merchant_order(*, merchant_id: int, platform_order_no: str | None = None,
                        mch_order_no: str | None = None) -> CollectionOrder | None:
    """The merchant's order by platform_order_no (preferred when both are given) or mch_order_no, locked for the rest
    of the transaction (`SELECT … FOR UPDATE`), or None when the merchant has no such order."""
    key, value = ("platform_order_no", platform_order_no) if platform_order_no else ("mch_order_no", mch_order_no)
    if not value:
        return None
    return _order_read_by_hand(_MERCHANT_ORDER_LOCK_BY[key], [merchant_id, value])[0]


def lock_collection_order(*, platform_order_no: str | None = None, order_id: int | None = None) -> CollectionOrder:
    order = _order_locked(pk=order_id) if order_id is not None else _order_locked(platform_order_no=platform_order_no)
    if order is None:
        raise DomainError(ErrorCode.ORDER_NOT_FOUND, f"collection order {platform_order_no or order_id} not found.")
    return order


def _success_legs(order: CollectionOrder) -> list[Leg]:
    credit = AccountKind.SETTLING if order.settlement == Product.Settlement.D1 else AccountKind.AVAILABLE
    legs = [Leg(AccountKind.PAYIN_CLEARING, -order.amount), Leg(credit, order.net_amount, order.merchant_id)]
    if order.fee:
        legs.append(Leg(AccountKind.FEE_REVENUE, order.fee))
    return legs


@retry_conflicts
@transaction.atomic(durable=True)
def collection_notify_paid(*, platform_order_no: str, upstream_reference: str = "",
                           paid_at: datetime | None = None) -> CollectionOrder:
    """The one entry of upstream 'paid' notifications (sandbox Pay button included). Idempotent: a duplicate
    changes nothing. A payment after expiry is honoured (docs/api.md, "Collection orders": EXPIRED → SUCCESS)."""
    order = lock_collection_order(platform_order_no=platform_order_no)
    if order.status == CollectionOrder.Status.SUCCESS:
        return order
    return collection_paid_locked(order, upstream_reference=upstream_reference, paid_at=paid_at)


class SandboxPay:
    """What the hosted page's sandbox Pay did (collection_sandbox_pay)."""

    PAID = "paid"  # paid now, or paid before: the page shows the paid order
    REFUSED = "refused"  # not a sandbox order, or a channel this deployment may not use: nothing moved
    NOT_PAYABLE = "not_payable"  # expired (even if the expiry task has not run yet): nothing moved


@first_transaction_checks_connection
@retry_conflicts
@transaction.atomic(durable=True)
def collection_sandbox_pay(*, pay_token: str) -> tuple[CollectionOrder | None, str]:
    """The hosted page's Pay on a sandbox order: the sandbox upstream's 'paid' notification, decided under the order's
    row lock, which is the page's one read of the order (docs/performance.md). The same locked transition as
    collection_notify_paid. Returns the order (None: no order has this pay_token) and a SandboxPay outcome. The Pay's
    first use of the database, so its transaction is the request's connection health check (no `SELECT 1` before
    it: apps.common.connection_check)."""
    order, generation = _order_locked_by_pay_token(pay_token)
    if order is None:
        return None, SandboxPay.REFUSED
    with refcache_scope(generation=generation):
        return _sandbox_pay_locked(order)


def _sandbox_pay_locked(order: CollectionOrder) -> tuple[CollectionOrder, str]:
    order.channel = channel_cached(order.channel_id)
    order.merchant = merchant_cached(order.merchant_id)  # the page of a refused or expired order shows its name
    try:
        adapter = payin_adapter(order.channel)
    except ChannelNotAllowed:  # a sandbox order in a live deployment takes no "payment"
        return order, SandboxPay.REFUSED
    if not getattr(adapter, "is_sandbox", False):
        return order, SandboxPay.REFUSED
    if order.status == CollectionOrder.Status.SUCCESS:
        return order, SandboxPay.PAID
    if not order.is_payable():
        return order, SandboxPay.NOT_PAYABLE
    collection_paid_locked(order, upstream_reference=adapter.start_payment(order=order).upstream_reference)
    return order, SandboxPay.PAID


# The paid transition's write, by hand (STYLE.md, "One database, one way"): `save(update_fields=…)` prepared and compiled
# the four fields' UPDATE on every pay-in, 0.27-0.33 ms of CPU against 0.07-0.08 ms by hand (loaded host), about 4-5 %
# of the hosted Pay's CPU, app and PostgreSQL (docs/performance.md, "Measured changes"). It writes the fields mark_paid
# sets, and updated_at as auto_now would set it.
_ORDER_PAID_UPDATE = ('UPDATE "collection_collectionorder" SET status = %s, paid_at = %s, upstream_reference = %s, '
                      "updated_at = %s WHERE id = %s")


def _order_paid_write(order: CollectionOrder) -> None:
    """Write what mark_paid changed on the locked order (_ORDER_PAID_UPDATE)."""
    order.updated_at = timezone.now()
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(_ORDER_PAID_UPDATE, [order.status, order.paid_at, order.upstream_reference, order.updated_at,
                                            order.pk])


def collection_paid_locked(order: CollectionOrder, *, upstream_reference: str = "",
                           paid_at: datetime | None = None) -> CollectionOrder:
    """CREATED/EXPIRED → SUCCESS with the credit, on an order the caller has locked (lock_collection_order) in its
    durable transaction: collection_notify_paid, and collection_upstream_apply, which decides under the same lock."""
    order.mark_paid(paid_at=paid_at or timezone.now(), upstream_reference=upstream_reference)
    _order_paid_write(order)
    ledger.post(kind=POSTING_SUCCESS, cause=order.platform_order_no, currency=order.currency_id,
                merchant_id=order.merchant_id, legs=_success_legs(order),
                memo=f"{order.settlement} pay-in {order.mch_order_no}")
    callback_enqueue(merchant=merchant_cached(order.merchant_id), type=CallbackEvent.Type.COLLECTION_SUCCESS,
                     platform_order_no=order.platform_order_no, payload=collection_success_payload(order))
    return order


# ---------------------------------------------------------------------------------------------- expiry

@retry_conflicts
@transaction.atomic(durable=True)
def collection_expire(*, order_id: int, now: datetime | None = None) -> bool:
    """CREATED → EXPIRED once expire_at has passed; False when there was nothing to do (idempotent)."""
    return collection_expire_locked(lock_collection_order(order_id=order_id), now=now)


def collection_expire_locked(order: CollectionOrder, *, now: datetime | None = None) -> bool:
    """The expiry of an order the caller has locked; False when there was nothing to do."""
    if order.status != CollectionOrder.Status.CREATED or order.expire_at > (now or timezone.now()):
        return False
    order.expire()
    order.save()
    return True


# ---------------------------------------------------------------------------------------------- D1 release

def settlement_cutoff(now: datetime | None = None) -> datetime:
    """00:00 of the current day in SETTLEMENT_TIME_ZONE (docs/api.md, "Collection orders"): credits paid before it are
    released."""
    local = (now or timezone.now()).astimezone(ZoneInfo(settings.SETTLEMENT_TIME_ZONE))
    return settlement_cutoff_of(local.date())


def settlement_cutoff_of(day: date) -> datetime:
    """00:00 of `day` in SETTLEMENT_TIME_ZONE: the cutoff of the release run on that day."""
    return datetime.combine(day, time.min, tzinfo=ZoneInfo(settings.SETTLEMENT_TIME_ZONE))


@retry_conflicts
@transaction.atomic(durable=True)
def collection_settlement_release_order(*, order_id: int, cutoff: datetime) -> CollectionOrder | None:
    """Move one D1 order's settling credit to available, once: settled_at under the row lock, and the
    (settlement.release, platform_order_no) posting's uniqueness as the backstop."""
    order = lock_collection_order(order_id=order_id)
    if (order.settled_at is not None or order.status != CollectionOrder.Status.SUCCESS
            or order.settlement != Product.Settlement.D1 or order.paid_at >= cutoff):
        return None
    order.settled_at = timezone.now()
    order.save(update_fields=["settled_at", "updated_at"])
    ledger.post(kind=POSTING_RELEASE, cause=order.platform_order_no, currency=order.currency_id,
                merchant_id=order.merchant_id, memo=f"D1 release of {order.mch_order_no}",
                legs=[Leg(AccountKind.SETTLING, -order.net_amount, order.merchant_id),
                      Leg(AccountKind.AVAILABLE, order.net_amount, order.merchant_id)])
    return order


SETTLEMENT_HEARTBEAT = "collection.settlement_release"


def collection_settlement_release(*, now: datetime | None = None, as_of: date | None = None,
                                  dry_run: bool = False) -> dict:
    """Release every due D1 credit (each in its own transaction); returns what was released per currency.

    `as_of` runs the release of that day (cutoff 00:00 of it): a past day repairs what that day's run should have
    released; in a sandbox deployment tomorrow shows D1 on the day of payment. Later days are refused, and a live
    deployment never releases a credit before its D1 (the upstream has not settled it). `dry_run` reports what is
    due and moves nothing."""
    today = (now or timezone.now()).astimezone(ZoneInfo(settings.SETTLEMENT_TIME_ZONE)).date()
    latest = today + timedelta(days=1) if platform_environment() == SANDBOX else today
    if as_of is not None and as_of > latest:
        raise ValueError(f"as_of {as_of.isoformat()} is after {latest.isoformat()}, the latest day this "
                         f"{platform_environment()} deployment releases")
    cutoff = settlement_cutoff_of(as_of or today)
    due = collection_orders_due_for_release(cutoff=cutoff)
    if dry_run:
        totals = due.order_by().values("currency_id").annotate(count=Count("pk"), amount=Sum(F("amount") - F("fee")))
        return {"due": {row["currency_id"]: {"count": row["count"], "amount": row["amount"]} for row in totals},
                "cutoff": cutoff.isoformat(), "dry_run": True}
    released: dict[str, dict[str, int]] = {}
    for order_id in list(due.values_list("pk", flat=True)):
        try:
            order = collection_settlement_release_order(order_id=order_id, cutoff=cutoff)
        except ledger.DuplicatePosting:
            logger.error("collection order %s: settlement already posted but settled_at unset; skipped", order_id)
            continue
        if order is None:
            continue
        total = released.setdefault(order.currency_id, {"count": 0, "amount": 0})
        total["count"] += 1
        total["amount"] += order.net_amount
    # The operations overview shows when the release last ran (whatever ran it: beat or release_settlement).
    Heartbeat.objects.update_or_create(name=SETTLEMENT_HEARTBEAT, defaults={"beat_at": timezone.now()})
    return {"released": released, "cutoff": cutoff.isoformat()}
