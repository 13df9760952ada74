from datetime import datetime

from apps.channels.models import UPSTREAM_PAYIN_FINAL, BankCode, Channel, UpstreamPayin
from apps.common.refcache import refcache_get


def bank_code_active(*, currency: str, code: str) -> BankCode | None:
    """The active bank code of the currency's table; None means code 2006. Cached reference data."""
    return refcache_get(("bank_code", currency, code),
                        lambda: BankCode.objects.filter(currency_id=currency, code=code, is_active=True).first())


def channel_cached(channel_id: int) -> Channel | None:
    """The channel by primary key (cached reference data): an order's channel without a join in the order's lock."""
    return refcache_get(("channel", channel_id), lambda: Channel.objects.filter(pk=channel_id).first())


def upstream_payins_unfinished(*, adapters: list[str], opened_since: datetime) -> dict[str, UpstreamPayin]:
    """Pay-ins those adapters opened since then whose upstream status is not known final, by platform_order_no: the
    ones reconciliation still asks about."""
    return {p.platform_order_no: p for p in upstream_payins_not_final().select_related("channel").filter(
        channel__adapter__in=adapters, created_at__gte=opened_since)}


def upstream_payins_not_final():
    """Opened pay-ins whose upstream status is not known final (index upstream_payin_unfinished)."""
    return UpstreamPayin.objects.exclude(upstream_status__in=UPSTREAM_PAYIN_FINAL)


def sandbox_payouts_returned(*, created_from: datetime, created_before: datetime):
    """platform_order_no of the disbursements the sandbox bank pays, then returns, accepted in that period (a
    subquery: the payout sweeper looks for the ones whose return was lost). Index: sandbox_disbursement_returned."""
    from apps.channels.models import SandboxDisbursement
    from apps.channels.sandbox_payout import OUTCOME_PAID_THEN_RETURNED

    return (SandboxDisbursement.objects.filter(outcome=OUTCOME_PAID_THEN_RETURNED, created_at__gte=created_from,
                                               created_at__lt=created_before)
            .values("platform_order_no"))


def channel_health_label(channel) -> str:
    """closed / open since ... (why) / half-open (probing) since ..., as every process sees it."""
    from django.utils import timezone

    from apps.channels.health import HALF_OPEN, OPEN, breaker_state, channel_health_read

    opened_at, reason = channel_health_read(channel.pk)
    state = breaker_state(opened_at, timezone.now())
    if state == OPEN:
        return f"open since {timezone.localtime(opened_at):%H:%M:%S} ({reason})"
    if state == HALF_OPEN:
        return f"half-open, probing since {timezone.localtime(opened_at):%H:%M:%S} ({reason})"
    return "closed (healthy)"


def channel_volume_today(channel) -> dict[str, int]:
    """The channel's orders created today (SETTLEMENT_TIME_ZONE), how many of them finished (payouts: SUCCESS or
    FAILED; pay-ins: SUCCESS or EXPIRED) and succeeded. Through the reverse relations: channels imports no domain."""
    from datetime import datetime, time
    from zoneinfo import ZoneInfo

    from django.conf import settings
    from django.db.models import Count, Q
    from django.utils import timezone

    from apps.channels.models import Channel

    zone = ZoneInfo(settings.SETTLEMENT_TIME_ZONE)
    start = datetime.combine(timezone.now().astimezone(zone).date(), time.min, tzinfo=zone)
    if channel.direction == Channel.Direction.PAYOUT:
        orders, finished = channel.payouts, ("SUCCESS", "FAILED")
    else:
        orders, finished = channel.collection_orders, ("SUCCESS", "EXPIRED")
    return orders.filter(created_at__gte=start).aggregate(
        orders=Count("pk"), finished=Count("pk", filter=Q(status__in=finished)),
        succeeded=Count("pk", filter=Q(status="SUCCESS")))
