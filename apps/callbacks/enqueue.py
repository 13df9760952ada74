"""Callback outbox, enqueue phase (contract §6): the payloads and the event row, written in the order's transaction.
(Transitional re-export while the callbacks app is split by phase.)"""

from apps.callbacks.services import (  # noqa: F401
    callback_enqueue,
    collection_success_payload,
    payout_reversed_payload,
    payout_terminal_payload,
)
