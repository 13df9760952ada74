from rest_framework import serializers

from apps.common.api.fields import CurrencyCodeField


class BalanceRequestSerializer(serializers.Serializer):
    currency = CurrencyCodeField(required=False, default="PHP")


class BalanceSerializer(serializers.Serializer):
    currency = serializers.CharField()
    available = serializers.IntegerField()
    settling = serializers.IntegerField()
