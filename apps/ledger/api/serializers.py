from datetime import date as calendar_date

from rest_framework import serializers

from apps.common.api.fields import CurrencyCodeField, StrictRegexField
from apps.common.api.serializers import RequestSerializer
from apps.ledger.statements import statement_today


class BalanceRequestSerializer(RequestSerializer):
    currency = CurrencyCodeField(required=False, default="PHP")


class BalanceSerializer(serializers.Serializer):
    currency = serializers.CharField()
    available = serializers.IntegerField()
    settling = serializers.IntegerField()


DATE_REGEX = r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\Z"
EARLIEST_STATEMENT_DATE = calendar_date(1970, 1, 1)


class StatementRequestSerializer(RequestSerializer):
    date = StrictRegexField(DATE_REGEX, error_messages={"invalid": "must be a date YYYY-MM-DD."},
                            help_text="The day in SETTLEMENT_TIME_ZONE (Asia/Manila), YYYY-MM-DD, not in the future.")
    currency = CurrencyCodeField(help_text="A currency of the merchant (3 upper-case letters).")
    format = StrictRegexField(r"\A(?:json|csv)\Z", required=False, default="json",
                              error_messages={"invalid": "must be json or csv."},
                              help_text="json (default): the statement in the envelope; csv: the signed CSV file.")

    def validate_date(self, value: str) -> calendar_date:
        try:
            day = calendar_date.fromisoformat(value)
        except ValueError:
            raise serializers.ValidationError("must be a date YYYY-MM-DD.") from None
        if day < EARLIEST_STATEMENT_DATE:
            raise serializers.ValidationError("must not be before 1970-01-01.")
        if day > statement_today():
            raise serializers.ValidationError("must not be in the future (in the settlement time zone).")
        return day


class StatementAccountSerializer(serializers.Serializer):
    account = serializers.ChoiceField(choices=["available", "settling", "frozen"])
    opening = serializers.IntegerField(help_text="Sum of the account's entries before 00:00 of the day.")
    closing = serializers.IntegerField(help_text="opening + the day's movements.")


class StatementMovementSerializer(serializers.Serializer):
    time = serializers.CharField(help_text="The posting's time, ISO 8601 in the settlement time zone.")
    kind = serializers.CharField(help_text="The posting's kind, e.g. collection.success, hold.place.")
    cause = serializers.CharField(
        help_text="What caused it: the order's platform_order_no (an ops reference for adjustments).")
    account = serializers.ChoiceField(choices=["available", "settling", "frozen"])
    amount = serializers.IntegerField(help_text="Signed, minor units.")
    balance = serializers.IntegerField(help_text="The account's balance after this movement.")


class StatementSerializer(serializers.Serializer):
    merchant_no = serializers.CharField()
    currency = serializers.CharField()
    date = serializers.CharField()
    time_zone = serializers.CharField()
    closing_time = serializers.CharField(help_text=(
        "The time of the closing rows: 00:00 of the next day for a closed day; for today, the time of the last "
        "movement so far (00:00 of the day if none): the figures as of then."))
    final = serializers.BooleanField(help_text=(
        "true when the day is closed (closing_time is the next 00:00): the figures will not change. false for "
        "today's provisional statement; ask again after the day's close for the final one."))
    accounts = StatementAccountSerializer(many=True)
    movements = StatementMovementSerializer(many=True)
    digest = serializers.CharField(help_text="SHA-256 (hex) of the CSV body (format=csv).")
    key_version = serializers.IntegerField(help_text="The platform key version that signed.")
    sign_type = serializers.CharField()
    signature = serializers.CharField(help_text="RSA2 over merchant_no, currency, date, time_zone, key_version, "
                                                "digest, sign_type (the string to sign of docs/api.md).")
