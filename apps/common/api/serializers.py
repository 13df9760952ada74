import copy

from django.utils.functional import cached_property

from rest_framework import serializers
from rest_framework.utils.serializer_helpers import BindingDict

from apps.common.api.fields import OrderNoField, PlatformOrderNoField


class RequestSerializer(serializers.Serializer):
    """Base of the signed endpoints' request serializers: flat (no nested serializers), validate-only.

    DRF deep-copies every declared field per serializer instance, re-running each field's __init__; for flat
    fields that are never mutated after construction a shallow copy per instance is enough (each copy is then
    bound to this serializer), and on pay/create that copy was a tenth of the request's CPU."""

    def get_fields(self):
        return {name: copy.copy(field) for name, field in self._declared_fields.items()}

    @cached_property
    def fields(self):
        """DRF's `fields`: this instance's own copy of each declared field, bound to it. Binding works out the
        same name, label and source for every instance of a class, so it is done once per class, on copies bound to
        a data-less instance; each instance then copies those and sets itself as their parent (pay/create's request
        serializer 112 -> 67 us CPU, docs/performance.md, "Measured changes")."""
        bound = type(self).__dict__.get("_bound_fields")
        if bound is None:
            bound = serializers.Serializer.fields.func(type(self)()).fields
            type(self)._bound_fields = bound
        fields = _BoundFields(self)
        for name, template in bound.items():
            field = object.__new__(type(template))
            field.__dict__.update(template.__dict__)
            field.parent = self
            fields.fields[name] = field
        return fields


class _BoundFields(BindingDict):
    """DRF's BindingDict, whose values() and items() are the dict's own views instead of MutableMapping's (one
    __getitem__ call per field): the serializer walks its fields three times per validation."""

    def values(self):
        return self.fields.values()

    def items(self):
        return self.fields.items()


class OrderLookupRequestSerializer(RequestSerializer):
    """pay/query and payout/query: one of the two order numbers; platform_order_no wins when both are sent."""

    mch_order_no = OrderNoField(required=False)
    platform_order_no = PlatformOrderNoField(required=False)

    def validate(self, attrs):
        if not attrs.get("mch_order_no") and not attrs.get("platform_order_no"):
            raise serializers.ValidationError("one of mch_order_no or platform_order_no is required.")
        return attrs
