"""The request fields' shortcut (apps/common/api/fields.py): a value the pattern matches skips the other validators,
so the outcome must be DRF's for every value."""

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.exceptions import ValidationError

from apps.callbacks.api.serializers import CallbacksListRequestSerializer, CallbacksResendRequestSerializer
from apps.collection.api.serializers import PayCreateRequestSerializer
from apps.common.api.fields import StrictRegexField
from apps.common.api.serializers import OrderLookupRequestSerializer
from apps.ledger.api.serializers import BalanceRequestSerializer
from apps.payout.api.serializers import PayoutCreateRequestSerializer

SERIALIZERS = [PayCreateRequestSerializer, PayoutCreateRequestSerializer, OrderLookupRequestSerializer,
               BalanceRequestSerializer, CallbacksListRequestSerializer, CallbacksResendRequestSerializer]
REGEX_FIELDS = [(serializer.__name__, name, field) for serializer in SERIALIZERS
                for name, field in serializer._declared_fields.items() if isinstance(field, StrictRegexField)]


def _outcome(field, value):
    try:
        return "ok", field.run_validation(value)
    except ValidationError as exc:
        return "error", [(str(detail), detail.code) for detail in exc.detail]


def test_every_regex_field_of_the_signed_requests_takes_the_shortcut():
    assert {(serializer, name) for serializer, name, _ in REGEX_FIELDS} >= {
        ("PayCreateRequestSerializer", "mch_order_no"), ("PayCreateRequestSerializer", "product_code"),
        ("PayoutCreateRequestSerializer", "payee_account"), ("PayoutCreateRequestSerializer", "bank_code")}
    assert all(field._sufficient_match is not None for _, _, field in REGEX_FIELDS)


def test_a_field_with_a_pattern_wider_than_its_max_length_runs_every_validator():
    assert StrictRegexField(r"\A[A-Z]{1,9}\Z", max_length=8)._sufficient_match is None
    assert StrictRegexField(r"\A[A-Z ]{1,8}\Z", max_length=8)._sufficient_match is None
    assert StrictRegexField(r"\A[A-Z]{1,8}\Z", max_length=8, min_length=2)._sufficient_match is None


@pytest.mark.parametrize(("serializer", "name", "field"), REGEX_FIELDS, ids=[f"{s}.{n}" for s, n, _ in REGEX_FIELDS])
@settings(max_examples=300, deadline=None)
@given(value=st.one_of(
    st.text(alphabet=st.sampled_from(list("aZ09_-. \n\x00é\u2028") + ["\ud800"]), max_size=70),
    st.from_regex(r"\A[A-Za-z0-9_-]{0,70}\Z"),
))
def test_the_shortcut_gives_drfs_value_or_first_error_for_any_string(serializer, name, field, value):
    drf = copy.copy(field)
    drf._sufficient_match = None  # DRF's run_validators: every validator, in order
    assert _outcome(field, value) == _outcome(drf, value)
