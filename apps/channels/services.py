"""Channels: which adapter a deployment may register (sandbox / live), the seeded routes and bank code table, the
one way an upstream's answer (webhook or reconciliation) enters the payout and collection services, and
reconciliation of what a lost webhook left open (docs/channels.md)."""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

from apps.channels.base import PayinState, PayoutState, UpstreamRejected, UpstreamUnavailable
from apps.channels.environment import SANDBOX, ChannelNotAllowed, adapter_allowed, platform_environment
from apps.channels.models import BankCode, Channel, UpstreamPayin
from apps.channels.registry import payin_adapter, payin_adapters, payout_adapter, payout_adapters
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
    for currency in currencies:
        for code, name, kind in SEED_BANK_CODES.get(currency.code, []):
            BankCode.objects.get_or_create(currency=currency, code=code, defaults={"name": name, "kind": kind})
    return {
        currency.code: list(BankCode.objects.filter(currency=currency, is_active=True).values_list("code", flat=True))
        for currency in currencies
    }


# --- pay-in opening -------------------------------------------------------------------------------------------


def channel_payin_open_dispatch(*, order) -> None:
    """After pay/create commits: a real upstream opens its payment (Xendit: the invoice) in a task, so pay/create
    answers without waiting for it. The sandbox opens nothing. A broker outage only delays it to the payer's first
    opening of pay_url, which opens it too (start_payment is idempotent per platform_order_no)."""
    cls = payin_adapters().get(order.channel.adapter)
    if cls is None or getattr(cls, "is_sandbox", False):
        return
    from apps.channels.tasks import open_upstream_payin

    try:
        open_upstream_payin.delay(order.platform_order_no)
    except Exception:  # noqa: BLE001 - broker down: the pay page opens the payment when the payer comes
        logger.warning("pay-in %s: upstream opening not dispatched; the pay page will open it", order)


def channel_payin_open(*, platform_order_no: str) -> str | None:
    """Open the order's upstream payment if it is still payable; its reference, or None when nothing was opened
    (paid, expired, a channel this deployment may not use, or the upstream not answering: the page tries again)."""
    from apps.collection.models import CollectionOrder

    order = (CollectionOrder.objects.select_related("channel", "currency", "merchant")
             .filter(platform_order_no=platform_order_no).first())
    if order is None or not order.is_payable():
        return None
    try:
        return payin_adapter(order.channel).start_payment(order=order).upstream_reference
    except (ChannelNotAllowed, UpstreamUnavailable, UpstreamRejected) as exc:
        logger.warning("pay-in %s: upstream payment not opened: %s", order, exc)
        return None


# --- upstream answers -----------------------------------------------------------------------------------------
# Webhooks and reconciliation both end here, with the state read from the upstream's API. The services called lock
# the order row and return early when it is already where the answer puts it, so a duplicate, late or out-of-order
# answer changes nothing twice. Lazy imports: the domain apps import channels, not the other way round.


def channel_payin_apply(*, state: PayinState, adapter: str) -> str | None:
    """An upstream's pay-in state onto the order: 'paid' → collection_notify_paid, 'expired' → collection_expire.
    Returns 'paid' / 'expired' when the order changed, else None."""
    from apps.collection.models import CollectionOrder
    from apps.collection.services import collection_expire, collection_notify_paid

    order = CollectionOrder.objects.select_related("channel").filter(platform_order_no=state.platform_order_no).first()
    if order is None or order.channel.adapter != adapter:
        # Not ours (another system on the same upstream account): acknowledged, ignored; Xendit need not retry.
        logger.warning("%s pay-in %r (upstream %s) is no order of ours; ignored", adapter, state.platform_order_no,
                       state.reference)
        return None
    if (state.amount, state.currency) != (order.amount, order.currency_id):
        # Never credit what was not asked for; an operator looks at it.
        logger.error("pay-in %s: upstream %s says %s %s, the order is %s %s; nothing applied", order,
                     state.reference, state.amount, state.currency, order.amount, order.currency_id)
        return None
    if state.upstream_status and state.outcome in ("paid", "expired"):
        UpstreamPayin.objects.filter(platform_order_no=order.platform_order_no).update(
            upstream_status=state.upstream_status, updated_at=timezone.now())
    if (state.outcome == "paid" and order.status == CollectionOrder.Status.SUCCESS
            and order.upstream_reference and order.upstream_reference != state.reference):
        # The payer paid a second upstream payment of one order (two invoices opened by racing first openings): the
        # order is credited once; the second payment is the operator's to refund upstream.
        logger.error("pay-in %s paid twice upstream: %s credited, %s (%s %s) not credited; refund it upstream",
                     order, order.upstream_reference, state.reference, state.amount, state.currency)
        return None
    if state.outcome == "paid" and order.status != CollectionOrder.Status.SUCCESS:
        collection_notify_paid(platform_order_no=order.platform_order_no, upstream_reference=state.reference,
                               paid_at=state.paid_at)
        return "paid"
    if state.outcome == "expired" and collection_expire(order_id=order.pk):
        return "expired"
    return None


def channel_payout_apply(*, platform_order_no: str, state: PayoutState, adapter: str) -> str | None:
    """An upstream's disbursement state onto the payout: 'paid' → SUCCESS, 'failed' → FAILED, 'returned' → SUCCESS
    then reversed in full (the return of a payout whose success notice never came). Returns 'succeeded', 'failed',
    'reversed' when the payout changed, else None."""
    from apps.payout.models import Payout
    from apps.payout.services import PayoutActionRefused, payout_channel_result, payout_channel_returned

    payout = Payout.objects.select_related("channel").filter(platform_order_no=platform_order_no).first()
    if payout is None or payout.channel.adapter != adapter:
        logger.warning("%s payout %r (upstream %s) is no order of ours; ignored", adapter, platform_order_no,
                       state.reference)
        return None
    if payout.upstream_reference and state.reference and state.reference != payout.upstream_reference:
        # Xendit's reference_id need not be unique: another disbursement carrying our order number is not ours.
        logger.error("payout %s is upstream %s; %s %s names it too; nothing applied", platform_order_no,
                     payout.upstream_reference, adapter, state.reference)
        return None
    if state.amount is not None and (state.amount, state.currency) != (payout.amount, payout.currency_id):
        logger.error("payout %s: upstream %s says %s %s, the order is %s %s; nothing applied", platform_order_no,
                     state.reference, state.amount, state.currency, payout.amount, payout.currency_id)
        return None
    if state.reference and not payout.upstream_reference:
        # The create's answer was lost (timeout): the reference learnt from the upstream, this column only.
        Payout.objects.filter(pk=payout.pk, upstream_reference="").update(upstream_reference=state.reference)
    processing = payout.status == Payout.Status.PROCESSING
    try:
        if state.outcome == "paid" and processing:
            payout_channel_result(platform_order_no=platform_order_no, outcome="paid")
            return "succeeded"
        if state.outcome == "failed" and processing:
            payout_channel_result(platform_order_no=platform_order_no, outcome="failed", fail_reason=state.fail_reason)
            return "failed"
        if state.outcome == "returned" and (processing or
                                            (payout.status == Payout.Status.SUCCESS and not payout.reversed_at)):
            if processing:
                payout_channel_result(platform_order_no=platform_order_no, outcome="paid")
            payout_channel_returned(platform_order_no=platform_order_no, reason=f"reversed by {adapter}")
            return "reversed"
    except PayoutActionRefused as exc:
        # e.g. a failure notice for a payout the upstream had already reported paid: an operator looks at it.
        logger.error("payout %s: upstream says %s; not applied: %s", platform_order_no, state.upstream_status, exc)
    return None


# --- reconciliation -------------------------------------------------------------------------------------------


def _upstream_adapters(registered: dict) -> list[str]:
    """Real upstreams this deployment may use: the ones reconciliation asks."""
    return [name for name, cls in registered.items() if adapter_allowed(cls) and not getattr(cls, "is_sandbox", False)]


def channels_reconcile(*, now: datetime | None = None) -> dict:
    """Ask the upstreams about payouts PROCESSING longer than CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS and about
    pay-ins past expiry (within CHANNEL_RECONCILE_PAYIN_WINDOW_SECONDS), and apply what a lost webhook left open.
    Each order in its own transactions; an upstream that does not answer is reported and asked again next run."""
    from apps.collection.models import CollectionOrder
    from apps.payout.models import Payout

    now = now or timezone.now()
    result = {"payouts": {"checked": 0, "succeeded": [], "failed": [], "reversed": []},
              "payins": {"checked": 0, "paid": [], "expired": []}, "errors": []}
    payout_names = _upstream_adapters(payout_adapters())
    stale = now - timedelta(seconds=settings.CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS)
    payouts = (Payout.objects.select_related("channel", "currency")
               .filter(status=Payout.Status.PROCESSING, submitted_at__lt=stale, channel__adapter__in=payout_names)
               .order_by("submitted_at"))
    for payout in payouts:
        result["payouts"]["checked"] += 1
        try:
            state = payout_adapter(payout.channel).payout_state(payout=payout)
            if state.outcome == "missing":
                continue  # never reached the upstream: the payout sweeper submits it again (same idempotency key)
            change = channel_payout_apply(platform_order_no=payout.platform_order_no, state=state,
                                          adapter=payout.channel.adapter)
        except (UpstreamUnavailable, UpstreamRejected) as exc:
            result["errors"].append({"platform_order_no": payout.platform_order_no, "error": str(exc)})
            continue
        if change:
            result["payouts"][change].append(payout.platform_order_no)

    payin_names = _upstream_adapters(payin_adapters())
    window = now - timedelta(seconds=settings.CHANNEL_RECONCILE_PAYIN_WINDOW_SECONDS)
    opened = {p.platform_order_no: p for p in UpstreamPayin.objects.filter(
        channel__adapter__in=payin_names).exclude(upstream_status__in=("PAID", "SETTLED", "EXPIRED"))
        .filter(created_at__gte=window - timedelta(days=1))}
    orders = (CollectionOrder.objects.select_related("channel", "currency")
              .filter(platform_order_no__in=list(opened), expire_at__lt=now, expire_at__gte=window,
                      status__in=(CollectionOrder.Status.CREATED, CollectionOrder.Status.EXPIRED))
              .order_by("expire_at"))
    for order in orders:
        result["payins"]["checked"] += 1
        try:
            state = payin_adapter(order.channel).payin_state(order=order,
                                                             reference=opened[order.platform_order_no].reference)
            change = channel_payin_apply(state=state, adapter=order.channel.adapter)
        except (UpstreamUnavailable, UpstreamRejected) as exc:
            result["errors"].append({"platform_order_no": order.platform_order_no, "error": str(exc)})
            continue
        if change:
            result["payins"][change].append(order.platform_order_no)
    if any(result["payouts"][k] for k in ("succeeded", "failed", "reversed")) or any(
            result["payins"][k] for k in ("paid", "expired")):
        logger.info("reconciliation changed: %s", result)
    if result["errors"]:
        logger.warning("reconciliation could not ask the upstream about %d orders: %s", len(result["errors"]),
                       result["errors"][:10])
    return result
