"""The staff request registry (apps/common/staff_requests.py): every kind of the model is registered by its owning
domain at start-up, and a registry cannot invent a kind or register one twice."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from apps.common.models import StaffRequest
from apps.common.staff_requests import KINDS, StaffRequestKind, staff_request_kind_register


def test_each_kind_is_registered_by_its_own_domain():
    owners = {kind: spec.apply.__module__ for kind, spec in KINDS.items()}
    assert set(owners) == set(StaffRequest.Kind.values)
    assert {kind: owner for kind, owner in owners.items() if owner != "apps.common.setting_changes"} == {
        StaffRequest.Kind.PAYOUT_REVERSAL: "apps.payout.staff_requests",
        StaffRequest.Kind.BALANCE_ADJUSTMENT: "apps.ledger.staff_requests",
        StaffRequest.Kind.MERCHANT_KEY: "apps.merchants.staff_requests",
        StaffRequest.Kind.ACCESS_RECOVERY: "apps.portal.staff_requests"}
    # Money settings: the mechanism is common's, each kind's models and role are its domain's.
    settings_kinds = {kind: ({m._meta.label for m in spec.apply.models}, spec.permission) for kind, spec in KINDS.items()
                      if owners[kind] == "apps.common.setting_changes"}
    assert settings_kinds == {
        StaffRequest.Kind.CHANNEL_SETTING: ({"channels.Channel", "channels.RefundRule"}, "channels.change_channel"),
        StaffRequest.Kind.BANK_CODE_SETTING: ({"channels.BankCode"}, "channels.change_bankcode"),
        StaffRequest.Kind.CURRENCY_SETTING: ({"currencies.Currency"}, "currencies.change_currency"),
        StaffRequest.Kind.PRODUCT_SETTING: ({"merchants.Product"}, "merchants.change_product"),
        StaffRequest.Kind.MERCHANT_SETTING: ({"merchants.Merchant", "merchants.MerchantCurrency",
                                              "merchants.MerchantProduct", "merchants.App"}, "merchants.change_merchant"),
        StaffRequest.Kind.DENY_LIST_SETTING: ({"payout.DenyListedAccount"}, "payout.change_denylistedaccount")}


def test_an_unknown_kind_or_a_second_registration_is_refused():
    spec = KINDS[StaffRequest.Kind.MERCHANT_KEY]
    with pytest.raises(ImproperlyConfigured, match="not a StaffRequest.Kind"):
        staff_request_kind_register("refund", StaffRequestKind(
            permission=spec.permission, describe=spec.describe, changes=spec.changes, apply=spec.apply,
            conflict=spec.conflict))
    with pytest.raises(ImproperlyConfigured, match="registered twice"):
        staff_request_kind_register(StaffRequest.Kind.MERCHANT_KEY, spec)
    assert "refund" not in KINDS and KINDS[StaffRequest.Kind.MERCHANT_KEY] is spec
