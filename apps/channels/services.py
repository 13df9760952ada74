"""Channels: which adapter a deployment may register (sandbox / live), the seeded routes and bank code table, and
reconciliation of what a lost webhook left open, through the payout and collection services registered in
apps.channels.registry (docs/channels.md)."""

import logging
from datetime import datetime

from django.core.exceptions import ValidationError
from django.utils import timezone

from apps.channels.environment import SANDBOX, adapter_allowed, platform_environment
from apps.channels.models import BankCode, Channel, UpstreamPayin
from apps.channels.registry import payin_adapters, payin_handlers, payout_adapters, payout_handlers
from apps.currencies.models import Currency

logger = logging.getLogger(__name__)


def channel_adapter_check(*, adapter: str, direction: str) -> None:
    """ValidationError unless the adapter is registered for the direction and may serve this deployment: a live
    deployment refuses sandbox channels, a sandbox deployment real ones."""
    registered = payin_adapters() if direction == Channel.Direction.PAYIN else payout_adapters()
    cls = registered.get(adapter)
    if cls is None:
        raise ValidationError({"adapter": f"no {direction} adapter named {adapter!r} (known: {sorted(registered)})."})
    if not adapter_allowed(cls):
        kind = "a sandbox" if getattr(cls, "is_sandbox", False) else "a real upstream"
        raise ValidationError({"adapter": f"{adapter!r} is {kind} adapter; this deployment's PLATFORM_ENVIRONMENT is "
                                          f"{platform_environment()}."})


def channel_upstream_check(*, channel: Channel) -> None:
    """ValidationError when the channel's upstream refuses its configuration: the adapter's optional
    `configuration_check(*, channel)` (Xendit payouts: our bank codes against its GET /payouts_channels). Called by
    Channel.clean() when a channel is created, activated, or its adapter, direction, currency, API root or secret
    key changes: in the admin when the change is asked for, and again when a second person approves it."""
    registered = payin_adapters() if channel.direction == Channel.Direction.PAYIN else payout_adapters()
    check = getattr(registered.get(channel.adapter), "configuration_check", None)
    if check is not None:
        check(channel=channel)


def channel_credentials_set(*, channel: Channel, secret_key: str | None = None,
                            callback_token: str | None = None) -> Channel:
    """Replace a channel's upstream credentials (None keeps the stored value); stored encrypted, never logged."""
    channel.set_credentials(secret_key=secret_key, callback_token=callback_token)
    channel.save(update_fields=["secret_key_encrypted", "callback_token_encrypted"])
    return channel

# Main banks and e-wallets per seeded currency (codes as commonly used by PH/ID/VN/JP/KW/US payout rails).
SEED_BANK_CODES: dict[str, list[tuple[str, str, str]]] = {
    "PHP": [
        ("BDO", "BDO Unibank", "bank"), ("BPI", "Bank of the Philippine Islands", "bank"),
        ("MBTC", "Metropolitan Bank and Trust", "bank"), ("LBP", "Land Bank of the Philippines", "bank"),
        ("PNB", "Philippine National Bank", "bank"), ("SECB", "Security Bank", "bank"),
        ("UBP", "UnionBank of the Philippines", "bank"), ("RCBC", "Rizal Commercial Banking Corporation", "bank"),
        ("CBC", "China Banking Corporation", "bank"), ("GCASH", "GCash", "ewallet"), ("MAYA", "Maya", "ewallet"),
        ("GRABPAY", "GrabPay", "ewallet"),
    ],
    "USD": [("CHASE", "JPMorgan Chase", "bank"), ("BOFA", "Bank of America", "bank"), ("CITI", "Citibank", "bank")],
    "IDR": [("BCA", "Bank Central Asia", "bank"), ("BRI", "Bank Rakyat Indonesia", "bank"),
            ("MANDIRI", "Bank Mandiri", "bank"), ("OVO", "OVO", "ewallet"), ("DANA", "DANA", "ewallet")],
    "VND": [("VCB", "Vietcombank", "bank"), ("TCB", "Techcombank", "bank"), ("MOMO", "MoMo", "ewallet")],
    "JPY": [("MUFG", "MUFG Bank", "bank"), ("SMBC", "Sumitomo Mitsui Banking", "bank"), ("MIZUHO", "Mizuho Bank", "bank")],
    "KWD": [("NBK", "National Bank of Kuwait", "bank"), ("KFH", "Kuwait Finance House", "bank")],
}


def channels_seed(*, currencies: list[Currency]) -> list[Channel]:
    """A sandbox pay-in and payout channel per currency, in a sandbox deployment only (a live one seeds none: its
    real channels are configured in the admin). Idempotent; existing rows are left as edited."""
    seeded = []
    if platform_environment() != SANDBOX:
        return seeded
    for currency in currencies:
        for direction in Channel.Direction:
            channel, _ = Channel.objects.get_or_create(
                code=f"SANDBOX_{currency.code}_{direction.value.upper()}",
                defaults={"name": f"Sandbox {currency.code} {direction.label}", "adapter": "sandbox",
                          "direction": direction, "currency": currency},
            )
            seeded.append(channel)
    return seeded


def bank_codes_seed(*, currencies: list[Currency]) -> dict[str, list[str]]:
    """The seeded banks and wallets that are missing, in one statement (rows already there are kept as edited); the
    active codes per currency."""
    BankCode.objects.bulk_create(
        [BankCode(currency=currency, code=code, name=name, kind=kind)
         for currency in currencies for code, name, kind in SEED_BANK_CODES.get(currency.code, [])],
        ignore_conflicts=True)
    active: dict[str, list[str]] = {currency.code: [] for currency in currencies}
    for currency_id, code in (BankCode.objects.filter(currency__in=currencies, is_active=True)
                              .order_by("currency", "code").values_list("currency_id", "code")):
        active[currency_id].append(code)
    return active


# --- upstream answers -----------------------------------------------------------------------------------------
# Webhooks and reconciliation read the state from the upstream's API and hand it to the payout and collection
# services registered in apps.channels.registry (payout_handlers / payin_handlers), which decide what moves.


def upstream_payin_status_record(*, platform_order_no: str, upstream_status: str, payment_method: str = "") -> None:
    """The last final status the upstream reported for the order's opened payment (reconciliation stops asking), and
    how the payer paid when it says (the refund rules follow the method)."""
    fields = {"upstream_status": upstream_status, "updated_at": timezone.now()}
    if payment_method:
        fields["payment_method"] = payment_method
    UpstreamPayin.objects.filter(platform_order_no=platform_order_no).update(**fields)


def channels_reconcile(*, now: datetime | None = None) -> dict:
    """Ask the upstreams about payouts PROCESSING longer than CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS and about
    pay-ins past expiry (within CHANNEL_RECONCILE_PAYIN_WINDOW_SECONDS), and apply what a lost webhook left open.
    Each order in its own transactions; an upstream that does not answer is reported and asked again next run."""
    now = now or timezone.now()
    payouts, payout_errors = payout_handlers().reconcile(now=now)
    payins, payin_errors = payin_handlers().reconcile(now=now)
    result = {"payouts": payouts, "payins": payins, "errors": payout_errors + payin_errors}
    if any(orders for section in (payouts, payins) for key, orders in section.items() if key != "checked"):
        logger.info("reconciliation changed: %s", result)
    if result["errors"]:
        logger.warning("reconciliation could not ask the upstream about %d orders: %s", len(result["errors"]),
                       result["errors"][:10])
    return result
