"""Request and response shapes of /payout/create and /payout/query (docs/api.md, "Endpoints", "Field formats")."""

from rest_framework import serializers

from apps.common.api.fields import AmountField, CodeField, OrderNoField, PayeeAccountField, StrictCharField
from apps.common.api.serializers import RequestSerializer


class PayoutCreateRequestSerializer(RequestSerializer):
    mch_order_no = OrderNoField()
    # Any well-formed code: an unknown product is 1002, an unknown currency 1001, an unknown bank code 2006.
    product_code = CodeField(max_length=64)
    amount = AmountField()
    currency = CodeField(max_length=16)
    payee_name = StrictCharField(max_length=128, trim_whitespace=False)
    payee_account = PayeeAccountField()
    bank_code = CodeField(max_length=32)  # BankCode.code's length
    # Echoed back verbatim by payout/query: whitespace is kept.
    attach = StrictCharField(max_length=512, required=False, default="", trim_whitespace=False)


class PayoutCreateSerializer(serializers.Serializer):
    platform_order_no = serializers.CharField()
    mch_order_no = serializers.CharField()
    amount = serializers.IntegerField()
    fee = serializers.IntegerField()
    currency = serializers.CharField()
    status = serializers.CharField(help_text="APPROVED or FROZEN on creation; the current status on a replay.")
    review_required = serializers.BooleanField()


class PayoutQuerySerializer(serializers.Serializer):
    platform_order_no = serializers.CharField()
    mch_order_no = serializers.CharField()
    amount = serializers.IntegerField()
    fee = serializers.IntegerField()
    currency = serializers.CharField()
    status = serializers.CharField()
    finished_at = serializers.IntegerField(required=False, help_text="Unix seconds; once terminal.")
    reversed_at = serializers.IntegerField(required=False, help_text="Unix seconds; if reversed.")
    fail_reason = serializers.CharField(required=False, help_text="On FAILED or REJECTED.")
    attach = serializers.CharField(required=False, help_text="When set at create.")
