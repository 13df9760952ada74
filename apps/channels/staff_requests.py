"""Channels and bank codes as staff requests (four eyes on money settings, docs/channels.md): a channel's
credentials, API root, currency, direction, activation and priority, its refund rules (a change of the channel,
docs/channels.md "Refund rules"), and a bank code's activation, change only when a second person with the same role
approves the change asked for in the admin (apps.common.setting_changes).
The credentials travel encrypted, as the channel stores them, and are only ever shown as "replaced"/"cleared"."""

from apps.channels.models import BankCode, Channel, RefundRule
from apps.common.models import StaffRequest
from apps.common.setting_changes import setting_change_kind
from apps.common.staff_requests import staff_request_kind_register

CHANNEL_SECRETS = {"secret_key_encrypted": "secret key", "callback_token_encrypted": "callback token"}

staff_request_kind_register(StaffRequest.Kind.CHANNEL_SETTING, setting_change_kind(
    models_=(Channel, RefundRule), permission="channels.change_channel", secrets=CHANNEL_SECRETS))
staff_request_kind_register(StaffRequest.Kind.BANK_CODE_SETTING, setting_change_kind(
    models_=(BankCode,), permission="channels.change_bankcode"))
