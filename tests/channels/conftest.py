"""Xendit against the local emulator (tests/channels/xendit_emulator.py), in a live deployment."""

import pytest

from apps.channels.models import Channel
from apps.channels.services import channel_credentials_set
from tests.channels.xendit_emulator import XenditEmulator
from tests.channels.xendit_sdk import assert_sdk_reads_every_answer

PAYIN_CODE = "XENDIT_PHP_PAYIN"
PAYOUT_CODE = "XENDIT_PHP_PAYOUT"


@pytest.fixture
def xendit_emulator():
    """The emulator; at teardown every answer it gave during the test is read by xendit-python's models (Xendit's
    own SDK), so no test can make it say something the SDK refuses."""
    emulator = XenditEmulator(stall_seconds=2.5).start()
    yield emulator
    emulator.stop()
    assert_sdk_reads_every_answer(emulator)


@pytest.fixture
def live(settings):
    """This deployment is live (production's default): only real upstreams may serve."""
    settings.PLATFORM_ENVIRONMENT = "live"
    settings.CHANNEL_HTTP_TIMEOUT_SECONDS = 1.0
    return settings


def xendit_channel_create(*, code: str, direction: str, emulator: XenditEmulator, currency: str = "PHP") -> Channel:
    channel = Channel.objects.create(code=code, name=f"Xendit {currency} {direction}", adapter="xendit",
                                     direction=direction, currency_id=currency, api_base_url=emulator.url)
    return channel_credentials_set(channel=channel, secret_key=emulator.secret_key,
                                   callback_token=emulator.callback_token)


@pytest.fixture
def xendit_channels(bootstrapped, live, xendit_emulator) -> dict[str, Channel]:
    """Bootstrapped in sandbox (its sandbox channels stay in the table), then the deployment is live with Xendit."""
    return {
        "payin": xendit_channel_create(code=PAYIN_CODE, direction=Channel.Direction.PAYIN, emulator=xendit_emulator),
        "payout": xendit_channel_create(code=PAYOUT_CODE, direction=Channel.Direction.PAYOUT, emulator=xendit_emulator),
    }


# --- PayMongo (tests/channels/paymongo_emulator.py) ---------------------------------------------------------------

PAYMONGO_PAYIN_CODE = "PAYMONGO_PHP_PAYIN"
PAYMONGO_PAYOUT_CODE = "PAYMONGO_PHP_PAYOUT"


@pytest.fixture
def paymongo_emulator():
    """The emulator; at teardown every webhook it signed during the test is read by paymongo-node's
    webhooks.constructEvent (PayMongo's own SDK), so no test can make it send an event the SDK refuses."""
    from tests.channels.paymongo_emulator import PayMongoEmulator
    from tests.channels.paymongo_node_sdk import assert_sdk_constructs_every_webhook

    emulator = PayMongoEmulator(stall_seconds=2.5).start()
    yield emulator
    emulator.stop()
    assert_sdk_constructs_every_webhook(emulator)


def paymongo_channel_create(*, code: str, direction: str, emulator, currency: str = "PHP",
                            priority: int = 100) -> Channel:
    channel = Channel.objects.create(code=code, name=f"PayMongo {currency} {direction}", adapter="paymongo",
                                     direction=direction, currency_id=currency, api_base_url=emulator.url,
                                     priority=priority)
    return channel_credentials_set(channel=channel, secret_key=emulator.secret_key,
                                   callback_token=emulator.webhook_secret)


@pytest.fixture
def paymongo_channels(bootstrapped, live, paymongo_emulator) -> dict[str, Channel]:
    """Bootstrapped in sandbox (its sandbox channels stay in the table), then the deployment is live with PayMongo."""
    return {
        "payin": paymongo_channel_create(code=PAYMONGO_PAYIN_CODE, direction=Channel.Direction.PAYIN,
                                         emulator=paymongo_emulator),
        "payout": paymongo_channel_create(code=PAYMONGO_PAYOUT_CODE, direction=Channel.Direction.PAYOUT,
                                          emulator=paymongo_emulator),
    }


@pytest.fixture
def quick_breaker(settings):
    """The circuit breaker of the failover drills: opens after 3 failures, probes after 60 s (a test backdates its
    state instead of waiting), closes after 2 good probes, every request a probe while half-open."""
    settings.CHANNEL_BREAKER_FAILURES = 3
    settings.CHANNEL_BREAKER_COOLDOWN_SECONDS = 60
    settings.CHANNEL_BREAKER_CLOSE_AFTER = 2
    settings.CHANNEL_BREAKER_PROBES = 2
    settings.CHANNEL_BREAKER_PROBE_SLICE_SECONDS = 10**6


def refund_amount_mismatches(adapter: str) -> float:
    """Upstream refund answers of another amount this process counted for operations (/metrics)."""
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value("payments_refund_amount_mismatches_total", {"adapter": adapter}) or 0.0


def refunds_stuck_a_minute_later() -> list[str]:
    """The refunds the operations overview lists as stuck ("Refund without its channel's answer") a minute from now,
    past the refund sweep's grace."""
    from datetime import timedelta

    from django.utils import timezone

    from apps.collection.sweep import refund_unanswered

    return sorted(refund_unanswered(timezone.now() + timedelta(minutes=1)).values_list("refund_no", flat=True))
