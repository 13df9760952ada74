import copy

from rest_framework import serializers

from apps.common.api.fields import OrderNoField, PlatformOrderNoField


class RequestSerializer(serializers.Serializer):
    """Base of the signed endpoints' request serializers: flat (no nested serializers), validate-only.

    DRF deep-copies every declared field per serializer instance, re-running each field's __init__; for flat
    fields that are never mutated after construction a shallow copy per instance is enough (each copy is then
    bound to this serializer), and on pay/create that copy was a tenth of the request's CPU."""

    def get_fields(self):
        return {name: copy.copy(field) for name, field in self._declared_fields.items()}


class OrderLookupRequestSerializer(RequestSerializer):
    """pay/query and payout/query: one of the two order numbers; platform_order_no wins when both are sent."""

    mch_order_no = OrderNoField(required=False)
    platform_order_no = PlatformOrderNoField(required=False)

    def validate(self, attrs):
        if not attrs.get("mch_order_no") and not attrs.get("platform_order_no"):
            raise serializers.ValidationError("one of mch_order_no or platform_order_no is required.")
        return attrs
