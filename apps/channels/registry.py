"""Which adapter serves a channel, which channel serves a currency in a direction, and which domain services an
upstream's answer enters through (registered by payout and collection at startup: channels imports neither)."""

from collections.abc import Callable
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

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


def upstream_adapter_names(direction: Channel.Direction) -> list[str]:
    """Real upstreams (not the sandbox) this deployment may use in that direction: the ones reconciliation asks."""
    registered = _PAYIN if direction == Channel.Direction.PAYIN else _PAYOUT
    return [name for name, cls in registered.items() if adapter_allowed(cls) and not getattr(cls, "is_sandbox", False)]


def route_candidates(*, currency: str, direction: Channel.Direction) -> tuple:
    """Every channel that may take new orders of that currency and direction (active, not drained, an adapter this
    deployment may use; a live deployment never falls back to a sandbox channel), best priority first, each with
    its breaker state (apps.channels.health.Candidate). Cached reference data (apps.common.refcache): the channel
    and channel health tables bump the generation, so no create reads them while nothing changes."""
    from apps.channels.health import Candidate
    from apps.channels.models import ChannelHealth

    def load() -> tuple:
        channels = list(Channel.objects.filter(currency_id=currency, direction=direction, is_active=True,
                                               is_draining=False, adapter__in=allowed_adapter_names(direction))
                        .order_by("priority", "code"))
        opened = {h.channel_id: h for h in ChannelHealth.objects.filter(
            channel__in=channels, state=ChannelHealth.State.OPEN)} if channels else {}
        return tuple(Candidate(channel, opened[channel.pk].opened_at, opened[channel.pk].reason)
                     if channel.pk in opened else Candidate(channel) for channel in channels)

    return refcache_get(("route_candidates", platform_environment(), currency, str(direction)), load)


def serving_channel(*, currency: str, direction: Channel.Direction) -> Channel | None:
    """The active, undrained channel of highest priority for that currency and direction, whatever its health; None
    means code 1001."""
    candidates = route_candidates(currency=currency, direction=direction)
    return candidates[0].channel if candidates else None


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


# --- where an upstream's answer enters the platform -------------------------------------------------------------
# Channels sits below payout and collection: they import it to submit payouts and open pay-ins, never the other way
# round. What an upstream reports back (a webhook, reconciliation, the sandbox bank) is decided by their services,
# which each domain registers here from its AppConfig.ready() (payout/apps.py, collection/apps.py).


@dataclass(frozen=True)
class PayoutHandlers:
    """The payout domain's entries for upstream answers, registered by its AppConfig.ready()."""

    # A PayoutState read from the upstream's API onto the payout: 'succeeded' / 'failed' / 'reversed' or None.
    apply_state: Callable[..., str | None]  # (*, platform_order_no: str, state: PayoutState, adapter: str)
    # A definite result: 'paid' or 'failed' (the sandbox bank, a submission the upstream refused).
    result: Callable[..., object]  # (*, platform_order_no: str, outcome: str, fail_reason: str = "")
    # A paid disbursement came back: reversed in full, fee refunded.
    returned: Callable[..., object]  # (*, platform_order_no: str, reason: str)
    # Ask the upstreams about stale PROCESSING payouts: ({"checked", "succeeded", "failed", "reversed"}, errors).
    reconcile: Callable[..., tuple[dict, list[dict]]]  # (*, now: datetime)


@dataclass(frozen=True)
class PayinHandlers:
    """The collection domain's entries for upstream answers, registered by its AppConfig.ready()."""

    # A PayinState read from the upstream's API onto the order: 'paid' / 'expired' or None.
    apply_state: Callable[..., str | None]  # (*, state: PayinState, adapter: str)
    # The payment completed upstream (the sandbox's Pay button).
    paid: Callable[..., object]  # (*, platform_order_no: str, upstream_reference: str)
    # Ask the upstreams about opened pay-ins past expiry: ({"checked", "paid", "expired"}, errors).
    reconcile: Callable[..., tuple[dict, list[dict]]]  # (*, now: datetime)
    # A refund's final answer: 'succeeded' or 'failed' (the sandbox's settlement), with the amount and currency the
    # upstream holds (compared with the refund's: a refund whose upstream amount differs is not finished by it).
    refund_result: Callable[..., object]  # (*, refund_no, outcome, fail_reason="", upstream_reference="", amount=None,
    #                                        currency="")


_HANDLERS: dict[str, PayoutHandlers | PayinHandlers] = {}


def register_payout_handlers(handlers: PayoutHandlers) -> None:
    _HANDLERS["payout"] = handlers


def register_payin_handlers(handlers: PayinHandlers) -> None:
    _HANDLERS["payin"] = handlers


def payout_handlers() -> PayoutHandlers:
    return _registered_handlers("payout")


def payin_handlers() -> PayinHandlers:
    return _registered_handlers("payin")


def _registered_handlers(direction: str):
    try:
        return _HANDLERS[direction]
    except KeyError:
        raise ImproperlyConfigured(f"no {direction} handlers registered: is its app in INSTALLED_APPS?") from None
