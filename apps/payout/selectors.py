"""Reads of payout orders: merchant-scoped lookups, the API/CLI representation, risk rules, the sweeper's lists."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from apps.common import audit
from apps.common.models import AuditLog
from apps.common.orders import order_lookup
from apps.common.refcache import refcache_get
from apps.currencies.formatting import format_minor
from apps.payout.models import DenyListedAccount, Payout


def unix(value: datetime | None) -> int | None:
    return int(value.timestamp()) if value else None


def payout_for_merchant(*, merchant_id: int, platform_order_no: str | None = None,
                        mch_order_no: str | None = None) -> Payout | None:
    """One of the merchant's payouts; platform_order_no wins when both are given (docs/api.md, "Endpoints")."""
    return order_lookup(Payout.objects.select_related("product").filter(merchant_id=merchant_id),
                        platform_order_no=platform_order_no, mch_order_no=mch_order_no)


def payout_create_data(payout: Payout) -> dict:
    """The `data` of POST /payout/create (docs/api.md, "Endpoints"), also for an idempotent replay."""
    return {
        "platform_order_no": payout.platform_order_no,
        "mch_order_no": payout.mch_order_no,
        "amount": payout.amount,
        "fee": payout.fee,
        "currency": payout.currency_id,
        "status": payout.status,
        "review_required": payout.review_required,
    }


def payout_query_data(payout: Payout) -> dict:
    """The `data` of POST /payout/query (docs/api.md, "Endpoints", "Payout orders"), printed by the review/reverse CLI
    too."""
    data = {
        "platform_order_no": payout.platform_order_no,
        "mch_order_no": payout.mch_order_no,
        "amount": payout.amount,
        "fee": payout.fee,
        "currency": payout.currency_id,
        "status": payout.status,
    }
    if payout.is_terminal and payout.finished_at:
        data["finished_at"] = unix(payout.finished_at)
    if payout.reversed_at:
        data["reversed_at"] = unix(payout.reversed_at)
    if payout.status in (Payout.Status.FAILED, Payout.Status.REJECTED) and payout.fail_reason:
        data["fail_reason"] = payout.fail_reason
    if payout.attach:
        data["attach"] = payout.attach
    return data


def payout_risk_reasons(*, currency, amount: int, review_threshold: int, payee_account: str,
                        dual_approval_threshold: int | None = None) -> list[str]:
    """The rules that need no count of earlier payouts (docs/api.md, "Payout orders"): the thresholds and the deny
    list (reference data, cached per process). payout_velocity_reason is the other rule; empty lists mean APPROVED at
    once."""
    reasons = []
    if amount >= review_threshold:
        reasons.append(f"Amount {format_minor(amount, currency)} is at or above the merchant's review threshold "
                       f"{format_minor(review_threshold, currency)}.")
    if dual_approval_threshold is not None and amount >= dual_approval_threshold:
        reasons.append(f"Amount is at or above the two-approval threshold "
                       f"{format_minor(dual_approval_threshold, currency)}: two different reviewers must approve.")
    listed = deny_listed_reason(payee_account=payee_account, currency=getattr(currency, "pk", currency))
    if listed is not None:
        reasons.append(f"Payee account is on the deny list: {listed}")
    return reasons


def deny_listed_reason(*, payee_account: str, currency: str) -> str | None:
    """Why the payee account is deny-listed in this currency (or in all), None if it is not: the oldest active entry.
    The whole active list is one cached entry (docs/performance.md, "Reference data cache"), so the usual answer,
    "not listed", costs no statement."""
    for entry_currency, reason in refcache_get(("payout.deny_list",), _deny_list_load).get(payee_account, ()):
        if entry_currency is None or entry_currency == currency:
            return reason
    return None


def _deny_list_load() -> dict[str, list[tuple[str | None, str]]]:
    listed: dict[str, list[tuple[str | None, str]]] = {}
    for account, currency, reason in (DenyListedAccount.objects.filter(is_active=True).order_by("pk")
                                      .values_list("payee_account", "currency_id", "reason")):
        listed.setdefault(account, []).append((currency, reason))
    return listed


# The velocity read, written by hand (docs/performance.md, "Measured changes"): the ORM cloned, built and compiled
# this three-condition SELECT on every create; by hand, payout/create's app CPU is 0.53 ms (13 %) lower, interleaved
# request by request in one process. Every condition an index condition of payout_velocity_payee_idx (payee
# account, merchant, created_at); at most `limit` ids are read.
_VELOCITY_IDS = ('SELECT "payout_payout"."id" FROM "payout_payout" WHERE "payout_payout"."payee_account" = %s '
                 'AND "payout_payout"."merchant_id" = %s AND "payout_payout"."created_at" >= %s LIMIT %s')


def payout_velocity_reason(*, merchant_id: int, payee_account: str) -> str | None:
    """The velocity rule (docs/api.md, "Payout orders"): more than PAYOUT_VELOCITY_LIMIT of the merchant's payouts, in
    any state, to one payee account created within 24 h. Payout create asks it holding the (merchant, payee account)
    lock, so two creates to one payee account count each other. Under the limit (nearly every create) one statement
    reads at most `limit` ids (payout_velocity_payee_idx); at or over it, the reason's number is counted."""
    limit = settings.PAYOUT_VELOCITY_LIMIT
    since = timezone.now() - timedelta(hours=24)
    with connection.cursor() as cursor:
        cursor.execute(_VELOCITY_IDS, [payee_account, merchant_id, since, limit])
        if len(cursor.fetchall()) < limit:
            return None
    earlier = Payout.objects.filter(merchant_id=merchant_id, payee_account=payee_account, created_at__gte=since)
    return f"Payout number {earlier.count() + 1} to this payee account within 24 h (more than {limit})."


def payout_decisions(payout: Payout) -> list[AuditLog]:
    """The audit trail of one payout, oldest first: its create (from the order row), then the stored rows
    (reviews, submission, channel results, reversals)."""
    rows = list(audit.trail(payout, since=payout.created_at).select_related("actor").order_by("created_at", "id"))
    if not any(row.action == "payout.create" for row in rows):  # older orders have a stored row
        rows.insert(0, payout_create_record(payout))
    return rows


def payout_create_record(payout: Payout) -> AuditLog:
    """The merchant's create as a trail row (not stored): every fact of it is a column of the order that never
    changes after the create, so payout/create writes no audit row of its own (docs/payouts.md)."""
    return AuditLog(created_at=payout.created_at, actor_label=payout.merchant.merchant_no, action="payout.create",
                    object_type=Payout._meta.label_lower, object_id=str(payout.pk), old={},
                    new={"status": Payout.Status.FROZEN if payout.review_required else Payout.Status.APPROVED,
                         "amount": payout.amount, "fee": payout.fee, "currency": payout.currency_id,
                         "payee_account": payout.masked_payee_account, "bank_code": payout.bank_code,
                         "risk_reasons": payout.risk_reasons, "approvals_required": payout.approvals_required})


# --- the reviewer's decision page ------------------------------------------------------------------------------

RISK_TAGS = [("two-approval", "2 approvals"), ("review threshold", "amount"), ("deny list", "deny list"),
             ("within 24 h", "velocity")]


def payout_risk_tags(reasons: list[str]) -> list[str]:
    """Short tags for the queue's narrow column: 'amount', 'deny list', 'velocity', '2 approvals'."""
    tags = []
    for reason in reasons:
        tag = next((tag for needle, tag in RISK_TAGS if needle in reason), "other")
        if tag not in tags:
            tags.append(tag)
    return tags


def payout_approvals_count(payout: Payout) -> int:
    return payout.approvals.filter(decision="APPROVE").count()


def payee_history(payout: Payout, *, limit: int = 20) -> list[Payout]:
    """Earlier payouts to this payee account and bank, across every merchant (newest first); shown masked."""
    return list(Payout.objects.filter(payee_account=payout.payee_account, bank_code=payout.bank_code)
                .exclude(pk=payout.pk).select_related("merchant", "currency").order_by("-created_at")[:limit])


def merchant_recent_payouts(payout: Payout, *, limit: int = 10) -> list[Payout]:
    return list(Payout.objects.filter(merchant_id=payout.merchant_id).exclude(pk=payout.pk)
                .select_related("currency").order_by("-created_at")[:limit])
