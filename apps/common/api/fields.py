"""Serializer fields that refuse coercion: a string where an integer is due (or the reverse) is code 1000."""

from rest_framework import serializers

MAX_AMOUNT = 2**53 - 1
ORDER_NO_REGEX = r"^[A-Za-z0-9_-]{1,64}$"
PLATFORM_ORDER_NO_REGEX = r"^[A-Za-z0-9]{1,64}$"
CURRENCY_REGEX = r"^[A-Z]{3}$"


class StrictCharField(serializers.CharField):
    default_error_messages = {"invalid": "must be a string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictRegexField(serializers.RegexField):
    default_error_messages = {"invalid": "has an invalid format.", "not_a_string": "must be a string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_a_string")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    default_error_messages = {"invalid": "must be an integer."}

    def to_internal_value(self, data):
        if type(data) is not int:  # bools and strings are refused, not coerced
            self.fail("invalid")
        return super().to_internal_value(data)


class AmountField(StrictIntegerField):
    """A positive integer of minor units below 2^53 (contract §1)."""

    default_error_messages = {"min_value": "must be a positive integer.", "max_value": "must be below 2^53."}

    def __init__(self, **kwargs):
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_AMOUNT)
        super().__init__(**kwargs)


def OrderNoField(**kwargs):  # noqa: N802 - a field factory reads like a field class
    return StrictRegexField(ORDER_NO_REGEX, max_length=64, error_messages={"invalid": "must be 1-64 characters of A-Z a-z 0-9 _ -."}, **kwargs)


def PlatformOrderNoField(**kwargs):  # noqa: N802
    return StrictRegexField(PLATFORM_ORDER_NO_REGEX, max_length=64, error_messages={"invalid": "must be 1-64 characters of A-Z a-z 0-9."}, **kwargs)


def CurrencyCodeField(**kwargs):  # noqa: N802
    return StrictRegexField(CURRENCY_REGEX, error_messages={"invalid": "must be a 3-letter upper-case currency code."}, **kwargs)
