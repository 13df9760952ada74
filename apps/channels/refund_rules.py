"""Whether a channel takes a refund of a given payment (docs/channels.md, "Refund rules"): the channel's RefundRule
rows for the payment's method, else its row for every method, else its adapter's `refund_rules`; no rule at all lets
every refund through. Decided at refund/create, under the pay-in's row lock, before anything is held: a refusal is
2007 with the rule's words."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from apps.channels.models import Channel, RefundRule, UpstreamPayin
from apps.channels.selectors import channel_cached
from apps.common.refcache import refcache_get


@dataclass(frozen=True)
class RuleInForce:
    method: str
    refundable: bool
    partial: bool
    window_days: int | None


def refund_rule_for(*, channel: Channel, adapter, payment_method: str) -> RuleInForce | None:
    """The rule that holds for a payment by `payment_method` on `channel`: its own method's, else its default's. The
    channel's rows are reference data, cached per process under the staleness rule (apps.common.refcache)."""
    rows = refcache_get(("refund_rules", channel.pk), lambda: tuple(RefundRule.objects.filter(channel=channel)))
    rules = rows or tuple(getattr(adapter, "refund_rules", ()))
    for method in (payment_method, ""):
        for rule in rules:
            if rule.method == method:
                return RuleInForce(method=payment_method, refundable=rule.refundable, partial=rule.partial,
                                   window_days=rule.window_days)
    return None


@dataclass(frozen=True)
class PaymentTaken:
    """Where and how the payer paid an order: the channel its upstream payment was opened on (which stays when a
    failover moves the order meanwhile; the order's own for the sandbox, which opens nothing) and the method the
    upstream named ("" when it did not say)."""

    channel: Channel
    method: str


def payment_taken(*, order) -> PaymentTaken:
    """The order's PaymentTaken, in one read of its upstream payment."""
    opened = (UpstreamPayin.objects.filter(platform_order_no=order.platform_order_no)
              .values_list("channel_id", "payment_method").first())
    return payment_taken_of(order=order, opened=opened)


def payment_taken_of(*, order, opened: tuple[int, str] | None) -> PaymentTaken:
    """The order's PaymentTaken from its upstream payment's (channel_id, payment_method) as read by the caller, None
    when none was opened; the channel from the reference cache."""
    if opened is None:
        return PaymentTaken(channel=channel_cached(order.channel_id) or order.channel, method="")
    channel_id, method = opened
    return PaymentTaken(channel=channel_cached(channel_id), method=method)


def refund_refusal(*, order, taken: PaymentTaken, adapter, amount: int, refunded_before: int, now: datetime) -> str:
    """Why the channel that took the payment cannot take this refund, or "" when it can. `refunded_before`: the
    order's refunds not FAILED, this one excluded."""
    channel, method = taken.channel, taken.method
    rule = refund_rule_for(channel=channel, adapter=adapter, payment_method=method)
    if rule is None:
        return ""
    paid_by = f"{method} payments" if method else "payments"
    code = channel.code
    if not rule.refundable:
        return f"channel {code} takes no refunds of {paid_by}."
    if not rule.partial and (refunded_before or amount != order.amount):
        return f"channel {code} refunds {paid_by} only once, in full ({order.amount})."
    if rule.window_days is not None and order.paid_at and now > order.paid_at + timedelta(days=rule.window_days):
        return f"channel {code} refunds {paid_by} only within {rule.window_days} days of payment."
    return ""
