"""docs/api.md, "Field formats": a request's string fields are checked as sent. Whatever field a request serializer
declares now or later, a padded value is either refused (1000) or kept exactly as sent; it is never trimmed into another value."""

import importlib

import pytest
from rest_framework import serializers

from apps.common.api.serializers import RequestSerializer

API_SERIALIZER_MODULES = ["apps.collection.api.serializers", "apps.payout.api.serializers",
                          "apps.ledger.api.serializers", "apps.common.api.serializers",
                          "apps.callbacks.api.serializers"]
# One of them is well formed for every string field (a date and a statement format; a callback type and status).
CANDIDATES = ["A1", "PHP", "https://shop.example/back", "2026-01-01", "json", "payout.terminal", "dead"]
PADDINGS = ["{}\n", "{}\r\n", " {}", "{} ", "\t{}", "{}\x0b"]


def request_string_fields():
    for module in API_SERIALIZER_MODULES:
        importlib.import_module(module)
    classes, pending = [], [RequestSerializer]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__ in API_SERIALIZER_MODULES:  # not the documentation-only subclasses of the schema
            classes.append(cls)
    return [pytest.param(cls, name, id=f"{cls.__name__}.{name}")
            for cls in classes for name, field in cls().fields.items() if isinstance(field, serializers.CharField)]


def well_formed(field) -> str:
    for value in CANDIDATES:
        try:
            field.run_validation(value)
            return value
        except serializers.ValidationError:
            continue
    raise AssertionError(f"no candidate is well formed for {field}")


@pytest.mark.parametrize("serializer_class, name", request_string_fields())
def test_request_string_field_refuses_or_keeps_a_padded_value_never_trims_it(serializer_class, name):
    field = serializer_class().fields[name]
    good = well_formed(field)
    for padding in PADDINGS:
        sent = padding.format(good)
        try:
            kept = field.run_validation(sent)
        except serializers.ValidationError:
            continue
        assert kept == sent, f"{serializer_class.__name__}.{name} turned {sent!r} into {kept!r}"
