"""Currencies as staff requests (four eyes on money settings): a currency's activation (and its name or
symbol) changes only when a second person with the same role approves it (apps.common.setting_changes)."""

from apps.common.models import StaffRequest
from apps.common.setting_changes import setting_change_kind
from apps.common.staff_requests import staff_request_kind_register
from apps.currencies.models import Currency

staff_request_kind_register(StaffRequest.Kind.CURRENCY_SETTING, setting_change_kind(
    models_=(Currency,), permission="currencies.change_currency"))
