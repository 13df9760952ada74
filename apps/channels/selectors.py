from datetime import datetime

from apps.channels.models import UPSTREAM_PAYIN_FINAL, BankCode, UpstreamPayin
from apps.common.refcache import refcache_get


def bank_code_active(*, currency: str, code: str) -> BankCode | None:
    """The active bank code of the currency's table; None means code 2006. Cached reference data."""
    return refcache_get(("bank_code", currency, code),
                        lambda: BankCode.objects.filter(currency_id=currency, code=code, is_active=True).first())


def upstream_payins_unfinished(*, adapters: list[str], opened_since: datetime) -> dict[str, UpstreamPayin]:
    """Pay-ins those adapters opened since then whose upstream status is not known final, by platform_order_no: the
    ones reconciliation still asks about."""
    return {p.platform_order_no: p for p in upstream_payins_not_final().filter(
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
