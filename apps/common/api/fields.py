r"""Serializer fields that refuse coercion: a string where an integer is due (or the reverse) is code 1000.

Formats hold on the value as sent (docs/api.md, "Field formats"): no field trims whitespace (DRF's CharField does by
default, which would turn "abc\n" and " abc " into the idempotency key "abc"), and every pattern is anchored with \A and
\Z (a `$` also matches before a final newline)."""

from rest_framework import serializers

from apps.common.amounts import MAX_AMOUNT
ORDER_NO_REGEX = r"\A[A-Za-z0-9_-]{1,64}\Z"
PLATFORM_ORDER_NO_REGEX = r"\A[A-Za-z0-9]{1,64}\Z"
PAYEE_ACCOUNT_REGEX = r"\A[A-Za-z0-9]{1,64}\Z"
CURRENCY_REGEX = r"\A[A-Z]{3}\Z"
# Codes the platform assigns (product_code, bank_code, and currency on the create endpoints): a well-formed code
# the platform does not know is a business error (1001, 1002, 2006); whitespace or other characters are 1000.
CODE_REGEX = r"\A[A-Za-z0-9_-]{{1,{max_length}}}\Z"


class StrictCharField(serializers.CharField):
    default_error_messages = {"invalid": "must be a string."}

    def __init__(self, **kwargs):
        kwargs.setdefault("trim_whitespace", False)  # checked as sent (docs/api.md, "Field formats")
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictRegexField(serializers.RegexField):
    default_error_messages = {"invalid": "has an invalid format.", "not_a_string": "must be a string."}

    def __init__(self, regex, **kwargs):
        kwargs.setdefault("trim_whitespace", False)  # checked as sent (docs/api.md, "Field formats")
        super().__init__(regex, **kwargs)

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
    """A positive integer of minor units below 2^53 (docs/api.md, "Field formats")."""

    default_error_messages = {"min_value": "must be a positive integer.", "max_value": "must be below 2^53."}

    def __init__(self, **kwargs):
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_AMOUNT)
        super().__init__(**kwargs)


def OrderNoField(**kwargs):  # noqa: N802 - a field factory reads like a field class
    return StrictRegexField(ORDER_NO_REGEX, max_length=64, error_messages={"invalid": "must be 1-64 characters of A-Z a-z 0-9 _ -."}, **kwargs)


def PlatformOrderNoField(**kwargs):  # noqa: N802
    return StrictRegexField(PLATFORM_ORDER_NO_REGEX, max_length=64, error_messages={"invalid": "must be 1-64 characters of A-Z a-z 0-9."}, **kwargs)


def PayeeAccountField(**kwargs):  # noqa: N802
    return StrictRegexField(PAYEE_ACCOUNT_REGEX, max_length=64,
                            error_messages={"invalid": "must be 1-64 characters of A-Z a-z 0-9."}, **kwargs)


def CurrencyCodeField(**kwargs):  # noqa: N802
    """balance: a 3-letter upper-case code ("php" is 1000, an unknown "XXX" 1001)."""
    return StrictRegexField(CURRENCY_REGEX, error_messages={"invalid": "must be a 3-letter upper-case currency code."}, **kwargs)


def CodeField(*, max_length: int, **kwargs):  # noqa: N802
    """product_code, bank_code, and currency on the create endpoints: 1-max_length of A-Z a-z 0-9 _ -."""
    return StrictRegexField(CODE_REGEX.format(max_length=max_length), max_length=max_length,
                            error_messages={"invalid": f"must be 1-{max_length} characters of A-Z a-z 0-9 _ -."},
                            **kwargs)


class StrictChoiceField(StrictCharField):
    """One of a fixed set of strings, compared as sent (DRF's ChoiceField would accept str(value) of any type)."""

    default_error_messages = {"invalid_choice": "must be one of: {choices}."}

    def __init__(self, *, choices, **kwargs):
        self.choices = tuple(choices)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if value not in self.choices:
            self.fail("invalid_choice", choices=", ".join(self.choices))
        return value
