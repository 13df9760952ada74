"""Sandbox and live deployments (docs/channels.md): PLATFORM_ENVIRONMENT decides which adapters may serve.

A sandbox deployment uses only the built-in sandbox adapters (money never moves); a live deployment only real
upstreams, so a simulator can never credit a merchant of a deployment that takes real money."""

from django.conf import settings

SANDBOX = "sandbox"
LIVE = "live"


class ChannelNotAllowed(RuntimeError):
    """The channel's adapter may not serve this deployment's environment (or is not registered)."""


def platform_environment() -> str:
    return settings.PLATFORM_ENVIRONMENT


def adapter_allowed(adapter_cls) -> bool:
    """Sandbox adapters serve only sandbox deployments; real upstreams only live ones."""
    return bool(getattr(adapter_cls, "is_sandbox", False)) == (platform_environment() == SANDBOX)
