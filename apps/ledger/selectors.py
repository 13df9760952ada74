from datetime import datetime

from django.db.models import Count, F, Q, Sum

from apps.ledger.models import MERCHANT_KINDS, AccountKind, Entry, Hold, LedgerAccount, Posting


def merchant_balances(*, merchant_id: int, currency: str) -> dict[str, int]:
    """available / settling / frozen of one merchant in one currency (zeros when never used)."""
    balances = {kind.value: 0 for kind in (AccountKind.AVAILABLE, AccountKind.SETTLING, AccountKind.FROZEN)}
    for kind, balance in LedgerAccount.objects.filter(merchant_id=merchant_id, currency_id=currency).values_list(
        "kind", "balance"
    ):
        balances[kind] = balance
    return balances


def account_balance(account: LedgerAccount) -> int:
    """A merchant account's cached balance; a platform account's sum of entries (it caches none, see the model)."""
    if account.merchant_id is not None:
        return account.balance
    return account.entries.aggregate(total=Sum("amount"))["total"] or 0


def platform_balance(*, currency: str, kind: AccountKind) -> int:
    """The platform's balance of one kind in one currency (0 when the account was never used)."""
    account = LedgerAccount.objects.filter(merchant__isnull=True, currency_id=currency, kind=kind).first()
    return account_balance(account) if account else 0


def statement_day_entries(*, merchant_id: int, currency: str, start: datetime, end: datetime) -> tuple[dict, list]:
    """What a statement shows of one merchant's accounts in one currency over [start, end): the opening per account
    kind (the sum of its entries whose posting is before `start`) and the entries of the window, posting attached,
    in posting order. Entries' time is their posting's created_at."""
    account_ids = list(LedgerAccount.objects.filter(merchant_id=merchant_id, currency_id=currency,
                                                    kind__in=MERCHANT_KINDS).values_list("pk", flat=True))
    opening = {kind.value: 0 for kind in MERCHANT_KINDS}
    if not account_ids:
        return opening, []
    opening.update(Entry.objects.filter(account_id__in=account_ids, posting__created_at__lt=start)
                   .values_list("account__kind").annotate(total=Sum("amount")).values_list("account__kind", "total"))
    entries = list(Entry.objects.filter(account_id__in=account_ids, posting__created_at__gte=start,
                                        posting__created_at__lt=end)
                   .select_related("posting", "account").order_by("posting__created_at", "posting_id", "id"))
    return opening, entries


def statement_merchants_with_movements(*, start: datetime, end: datetime) -> list[tuple[int, str]]:
    """(merchant_id, currency) of every merchant account moved in [start, end)."""
    return list(Entry.objects.filter(account__merchant__isnull=False, posting__created_at__gte=start,
                                     posting__created_at__lt=end)
                .values_list("account__merchant_id", "currency_id").distinct().order_by("account__merchant_id",
                                                                                         "currency_id"))


def ledger_verify() -> dict:
    """Check every invariant of the ledger; returns {"ok": bool, "checks": {...}, "failures": [...]}."""
    failures: list[dict] = []

    unbalanced = (
        Entry.objects.values("posting_id", "currency_id").annotate(total=Sum("amount")).exclude(total=0)
    )
    failures += [{"check": "posting_zero_sum", "posting_id": row["posting_id"], "currency": row["currency_id"],
                  "sum": row["total"]} for row in unbalanced[:100]]

    per_currency = Entry.objects.values("currency_id").annotate(total=Sum("amount")).exclude(total=0)
    failures += [{"check": "currency_zero_sum", "currency": row["currency_id"], "sum": row["total"]}
                 for row in per_currency]

    mismatched_currency = Entry.objects.exclude(currency_id=F("account__currency_id")).values_list("id", flat=True)
    failures += [{"check": "entry_currency_matches_account", "entry_id": pk} for pk in mismatched_currency[:100]]

    stale = (
        LedgerAccount.objects.filter(merchant__isnull=False).annotate(entries_sum=Sum("entries__amount"))
        .exclude(balance=0, entries_sum__isnull=True)
        .filter(Q(entries_sum__isnull=True) | ~Q(balance=F("entries_sum")))
    )
    failures += [{"check": "cached_balance_equals_entries", "account": str(acc), "account_id": acc.pk,
                  "cached": acc.balance, "entries": acc.entries_sum or 0} for acc in stale[:100]]

    cached = LedgerAccount.objects.filter(merchant__isnull=True).exclude(balance=0)
    failures += [{"check": "platform_balance_not_cached", "account": str(acc), "balance": acc.balance}
                 for acc in cached[:100]]

    negative = LedgerAccount.objects.filter(merchant__isnull=False, balance__lt=0)
    failures += [{"check": "merchant_balance_non_negative", "account": str(acc), "balance": acc.balance}
                 for acc in negative[:100]]

    lonely = Posting.objects.annotate(n=Count("entries")).filter(n__lt=2).values_list("id", flat=True)
    failures += [{"check": "posting_has_two_legs", "posting_id": pk} for pk in lonely[:100]]

    frozen_total = LedgerAccount.objects.filter(kind=AccountKind.FROZEN).values("merchant_id", "currency_id").annotate(
        total=Sum("balance"))
    held = {(row["merchant_id"], row["currency_id"]): row["total"] for row in
            Hold.objects.filter(status=Hold.Status.HELD).values("merchant_id", "currency_id").annotate(total=Sum("amount"))}
    for row in frozen_total:
        key = (row["merchant_id"], row["currency_id"])
        if held.pop(key, 0) != row["total"]:
            failures.append({"check": "frozen_equals_open_holds", "merchant_id": key[0], "currency": key[1],
                             "frozen": row["total"]})
    failures += [{"check": "frozen_equals_open_holds", "merchant_id": k[0], "currency": k[1], "held": v}
                 for k, v in held.items() if v]

    return {
        "ok": not failures,
        "checks": {
            "accounts": LedgerAccount.objects.count(),
            "postings": Posting.objects.count(),
            "entries": Entry.objects.count(),
        },
        "failures": failures,
    }

