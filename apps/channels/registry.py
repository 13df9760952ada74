"""Which adapter serves a channel, and which channel serves a currency in a direction."""

from apps.channels.base import PayinAdapter, PayoutAdapter
from apps.channels.environment import ChannelNotAllowed, adapter_allowed, platform_environment
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


def allowed_adapter_names(direction: Channel.Direction) -> list[str]:
    """Adapters this deployment may route to (apps.channels.environment): sandbox ones only in sandbox."""
    registered = _PAYIN if direction == Channel.Direction.PAYIN else _PAYOUT
    return sorted(name for name, cls in registered.items() if adapter_allowed(cls))


def serving_channel(*, currency: str, direction: Channel.Direction) -> Channel | None:
    """The active channel of highest priority for that currency and direction among the adapters this deployment
    may use; None means code 1001 (a live deployment never falls back to a sandbox channel). Cached reference data
    (apps.common.refcache)."""
    return refcache_get(("serving_channel", platform_environment(), currency, str(direction)), lambda: (
        Channel.objects.filter(currency_id=currency, direction=direction, is_active=True,
                               adapter__in=allowed_adapter_names(direction))
        .order_by("priority", "code")
        .first()
    ))


def _adapter(registered: dict, channel: Channel):
    cls = registered.get(channel.adapter)
    if cls is None or not adapter_allowed(cls):
        raise ChannelNotAllowed(f"channel {channel.code} (adapter {channel.adapter!r}) may not serve a "
                                f"{platform_environment()} deployment.")
    return cls()


def payin_adapter(channel: Channel) -> PayinAdapter:
    """The channel's pay-in adapter; ChannelNotAllowed for a sandbox channel in a live deployment and vice versa."""
    return _adapter(_PAYIN, channel)


def payout_adapter(channel: Channel) -> PayoutAdapter:
    """The channel's payout adapter; ChannelNotAllowed for a sandbox channel in a live deployment and vice versa."""
    return _adapter(_PAYOUT, channel)
