from rest_framework import serializers

from apps.common.api.fields import OrderNoField, PlatformOrderNoField


class OrderLookupRequestSerializer(serializers.Serializer):
    """pay/query and payout/query: one of the two order numbers; platform_order_no wins when both are sent."""

    mch_order_no = OrderNoField(required=False)
    platform_order_no = PlatformOrderNoField(required=False)

    def validate(self, attrs):
        if not attrs.get("mch_order_no") and not attrs.get("platform_order_no"):
            raise serializers.ValidationError("one of mch_order_no or platform_order_no is required.")
        return attrs
