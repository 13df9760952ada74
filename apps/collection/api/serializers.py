"""Request and response shapes of /pay/create, /pay/query, /refund/create and /refund/query (docs/api.md,
"Endpoints", "Refunds", "Field formats")."""

from urllib.parse import urlsplit

from rest_framework import serializers

from apps.collection.models import DEFAULT_EXPIRE_SECONDS, MAX_EXPIRE_SECONDS, MIN_EXPIRE_SECONDS
from apps.common.api.fields import (AmountField, CodeField, OrderNoField, PlatformOrderNoField, StrictCharField,
                                    StrictIntegerField)
from apps.common.api.serializers import RequestSerializer


class ReturnUrlField(StrictCharField):
    default_error_messages = {"not_http": "must be an http(s) URL."}

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", 512)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        try:
            parts = urlsplit(value)
        except ValueError:
            self.fail("not_http")
        if parts.scheme.lower() not in ("http", "https") or not parts.netloc or any(c.isspace() for c in value):
            self.fail("not_http")
        return value


class PayCreateRequestSerializer(RequestSerializer):
    mch_order_no = OrderNoField()
    product_code = CodeField(max_length=64)
    amount = AmountField()
    # Any well-formed code: one the merchant has not enabled ("php" included) is 1001 (docs/api.md, "Endpoints").
    currency = CodeField(max_length=16)
    subject = StrictCharField(max_length=256, required=False, default="", trim_whitespace=False)
    return_url = ReturnUrlField(required=False, default="")
    expire_seconds = StrictIntegerField(min_value=MIN_EXPIRE_SECONDS, max_value=MAX_EXPIRE_SECONDS, required=False,
                                        default=DEFAULT_EXPIRE_SECONDS)
    # Echoed back verbatim: whitespace is kept.
    attach = StrictCharField(max_length=512, required=False, default="", trim_whitespace=False)


class PayCreateSerializer(serializers.Serializer):
    platform_order_no = serializers.CharField()
    mch_order_no = serializers.CharField()
    pay_url = serializers.CharField()
    amount = serializers.IntegerField()
    currency = serializers.CharField()
    expire_at = serializers.IntegerField(help_text="Unix seconds.")
    status = serializers.CharField()


class PayQuerySerializer(serializers.Serializer):
    platform_order_no = serializers.CharField()
    mch_order_no = serializers.CharField()
    amount = serializers.IntegerField()
    currency = serializers.CharField()
    status = serializers.CharField()
    paid_at = serializers.IntegerField(required=False, help_text="Unix seconds; on SUCCESS only.")
    attach = serializers.CharField(required=False, help_text="When set at create.")


def pay_create_data(order) -> dict:
    return {
        "platform_order_no": order.platform_order_no,
        "mch_order_no": order.mch_order_no,
        "pay_url": order.pay_url,
        "amount": order.amount,
        "currency": order.currency_id,
        "expire_at": int(order.expire_at.timestamp()),
        "status": order.status,
    }


# The columns pay_query_data reads: pay/query loads only these.
PAY_QUERY_FIELDS = ("platform_order_no", "mch_order_no", "amount", "currency_id", "status", "paid_at", "attach")


def pay_query_data(order) -> dict:
    data = {
        "platform_order_no": order.platform_order_no,
        "mch_order_no": order.mch_order_no,
        "amount": order.amount,
        "currency": order.currency_id,
        "status": order.status,
    }
    if order.status == order.Status.SUCCESS:
        data["paid_at"] = int(order.paid_at.timestamp())
    if order.attach:
        data["attach"] = order.attach
    return data


class RefundCreateRequestSerializer(RequestSerializer):
    """refund/create: the paid pay-in by one of its numbers (platform_order_no wins when both are sent)."""

    mch_order_no = OrderNoField(required=False)
    platform_order_no = PlatformOrderNoField(required=False)
    mch_refund_no = OrderNoField()
    amount = AmountField()
    reason = StrictCharField(max_length=256, required=False, default="", trim_whitespace=False)

    def validate(self, attrs):
        if not attrs.get("mch_order_no") and not attrs.get("platform_order_no"):
            raise serializers.ValidationError("one of mch_order_no or platform_order_no is required.")
        return attrs


class RefundQueryRequestSerializer(RequestSerializer):
    """refund/query: one of the refund's numbers; refund_no wins when both are sent."""

    mch_refund_no = OrderNoField(required=False)
    refund_no = PlatformOrderNoField(required=False)

    def validate(self, attrs):
        if not attrs.get("mch_refund_no") and not attrs.get("refund_no"):
            raise serializers.ValidationError("one of mch_refund_no or refund_no is required.")
        return attrs


class RefundSerializer(serializers.Serializer):
    mch_refund_no = serializers.CharField()
    refund_no = serializers.CharField()
    mch_order_no = serializers.CharField()
    platform_order_no = serializers.CharField()
    currency = serializers.CharField()
    amount = serializers.IntegerField()
    status = serializers.CharField(help_text="PROCESSING, SUCCESS or FAILED.")
    created_at = serializers.IntegerField(help_text="Unix seconds.")
    refunded_total = serializers.IntegerField(help_text="The order's refunds not FAILED, this one included.")
    refundable = serializers.IntegerField(help_text="What the order can still be refunded: amount − refunded_total.")
    finished_at = serializers.IntegerField(required=False, help_text="Unix seconds; once terminal.")
    fail_reason = serializers.CharField(required=False, help_text="On FAILED.")


def refund_data(refund) -> dict:
    """The answer of refund/create and refund/query; `refund` carries its order's refunded_total and refundable."""
    data = {
        "mch_refund_no": refund.mch_refund_no,
        "refund_no": refund.refund_no,
        "mch_order_no": refund.order.mch_order_no,
        "platform_order_no": refund.order.platform_order_no,
        "currency": refund.currency_id,
        "amount": refund.amount,
        "status": refund.status,
        "created_at": int(refund.created_at.timestamp()),
        "refunded_total": refund.refunded_total,
        "refundable": refund.refundable,
    }
    if refund.finished_at is not None:
        data["finished_at"] = int(refund.finished_at.timestamp())
    if refund.status == refund.Status.FAILED:
        data["fail_reason"] = refund.fail_reason
    return data
