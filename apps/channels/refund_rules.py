"""Whether a channel takes a refund of a given payment (docs/channels.md, "Refund rules"): the channel's RefundRule
rows for the payment's method, else its row for every method, else its adapter's `refund_rules`; no rule at all lets
every refund through. Decided at refund/create, under the pay-in's row lock, before anything is held: a refusal is
2007 with the rule's words."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from apps.channels.models import Channel, RefundRule, UpstreamPayin


@dataclass(frozen=True)
class RuleInForce:
    method: str
    refundable: bool
    partial: bool
    window_days: int | None


def refund_rule_for(*, channel: Channel, adapter, payment_method: str) -> RuleInForce | None:
    """The rule that holds for a payment by `payment_method` on `channel`: its own method's, else its default's."""
    rows = list(RefundRule.objects.filter(channel=channel, method__in=[payment_method, ""]))
    rules = rows or list(getattr(adapter, "refund_rules", ()))
    for method in (payment_method, ""):
        for rule in rules:
            if rule.method == method:
                return RuleInForce(method=payment_method, refundable=rule.refundable, partial=rule.partial,
                                   window_days=rule.window_days)
    return None


def payment_method_of(*, platform_order_no: str) -> str:
    """How the payer paid the order, as its upstream said ("" when it did not, or for the sandbox)."""
    return (UpstreamPayin.objects.filter(platform_order_no=platform_order_no)
            .values_list("payment_method", flat=True).first() or "")


def payment_channel_of(*, order) -> Channel:
    """The channel that took the order's payment: the one its upstream payment was opened on (UpstreamPayin.channel,
    which stays when a failover moves the order meanwhile), else the order's own (the sandbox opens nothing)."""
    opened = UpstreamPayin.objects.select_related("channel").filter(platform_order_no=order.platform_order_no).first()
    return opened.channel if opened is not None else order.channel


def refund_refusal(*, order, adapter, amount: int, refunded_before: int, now: datetime,
                   channel: Channel | None = None) -> str:
    """Why the channel that took the payment (`channel`, the order's by default) cannot take this refund, or "" when
    it can. `refunded_before`: the order's refunds not FAILED, this one excluded."""
    channel = channel or order.channel
    method = payment_method_of(platform_order_no=order.platform_order_no)
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
