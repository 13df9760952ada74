"""Which adapter serves a channel, and which channel serves a currency in a direction."""

from apps.channels.base import PayinAdapter, PayoutAdapter
from apps.channels.models import Channel
from apps.common.refcache import refcache_get

_PAYIN: dict[str, type[PayinAdapter]] = {}
_PAYOUT: dict[str, type[PayoutAdapter]] = {}


def register_payin(cls: type[PayinAdapter]) -> type[PayinAdapter]:
    _PAYIN[cls.name] = cls
    return cls


def register_payout(cls: type[PayoutAdapter]) -> type[PayoutAdapter]:
    _PAYOUT[cls.name] = cls
    return cls


def payin_adapters() -> dict[str, type[PayinAdapter]]:
    """Every registered pay-in adapter class by name."""
    return dict(_PAYIN)


def payout_adapters() -> dict[str, type[PayoutAdapter]]:
    """Every registered payout adapter class by name."""
    return dict(_PAYOUT)


def serving_channel(*, currency: str, direction: Channel.Direction) -> Channel | None:
    """The active channel of highest priority for that currency and direction; None means code 1001.
    Cached reference data (apps.common.refcache)."""
    return refcache_get(("serving_channel", currency, str(direction)), lambda: (
        Channel.objects.filter(currency_id=currency, direction=direction, is_active=True)
        .order_by("priority", "code")
        .first()
    ))


def payin_adapter(channel: Channel) -> PayinAdapter:
    return _PAYIN[channel.adapter]()


def payout_adapter(channel: Channel) -> PayoutAdapter:
    return _PAYOUT[channel.adapter]()
