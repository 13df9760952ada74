from rest_framework import serializers

from apps.common.api.fields import CurrencyCodeField
from apps.common.api.serializers import RequestSerializer


class BalanceRequestSerializer(RequestSerializer):
    currency = CurrencyCodeField(required=False, default="PHP")


class BalanceSerializer(serializers.Serializer):
    currency = serializers.CharField()
    available = serializers.IntegerField()
    settling = serializers.IntegerField()
