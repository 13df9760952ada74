"""The staff request registry (apps/common/staff_requests.py): every kind of the model is registered by its owning
domain at start-up, and a registry cannot invent a kind or register one twice."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from apps.common.models import StaffRequest
from apps.common.staff_requests import KINDS, StaffRequestKind, staff_request_kind_register


def test_each_kind_is_registered_by_its_own_domain():
    owners = {kind: spec.apply.__module__ for kind, spec in KINDS.items()}
    assert owners == {StaffRequest.Kind.PAYOUT_REVERSAL: "apps.payout.staff_requests",
                      StaffRequest.Kind.BALANCE_ADJUSTMENT: "apps.ledger.staff_requests",
                      StaffRequest.Kind.MERCHANT_KEY: "apps.merchants.staff_requests"}


def test_an_unknown_kind_or_a_second_registration_is_refused():
    spec = KINDS[StaffRequest.Kind.MERCHANT_KEY]
    with pytest.raises(ImproperlyConfigured, match="not a StaffRequest.Kind"):
        staff_request_kind_register("refund", StaffRequestKind(spec.permission, spec.describe, spec.apply,
                                                               spec.conflict))
    with pytest.raises(ImproperlyConfigured, match="registered twice"):
        staff_request_kind_register(StaffRequest.Kind.MERCHANT_KEY, spec)
    assert "refund" not in KINDS and KINDS[StaffRequest.Kind.MERCHANT_KEY] is spec
