"""Refunds in the soak (docs/testing.md, "Refunds in the soak"): merchants refund paid pay-ins in parts through the
signed API while payers go on paying, and at the same moment the portal refunds the same orders through the service
it calls.

Per paid pay-in the `refunds` actor releases together, from threads of their own: two or three partial refunds over
`refund/create` (some ending in 99, which the sandbox fails), an identical replay of one of them, and the portal's
refund; then a conflicting replay (same mch_refund_no, another amount: 2001) and a refund of more than the order was
paid (always 2008). The sandbox deployment only: the soak's Xendit side (tests/soak/upstream.py) answers no refunds.

The checks read the database after the quiet period: no order refunded beyond what was paid, every refund terminal
or legitimately waiting, and each answer of the history as the database has it. The callbacks and the ledger's
balances take refunds into account in the harness's own checks (tests/soak/harness.py).
"""

import random
import time
from datetime import timedelta

from tests.soak.harness import Op, Soak, at_once, check

REFUND_LIMIT = 400  # orders one actor refunds at most in a run


def refund_params(order: dict, mch_refund_no: str, amount: int) -> dict:
    return {"platform_order_no": order["platform_order_no"], "mch_refund_no": mch_refund_no, "amount": amount,
            "reason": "soak"}


def refund_parts(rng: random.Random, amount: int) -> list[int]:
    """Two or three parts of a paid amount that together stay within it (a little is often left over); about one
    in four ends in 99 so that the sandbox fails it."""
    count = rng.randint(2, 3) if amount >= 300 else 1
    parts = []
    left = amount
    for i in range(count):
        part = rng.randint(1, max(1, left // (count - i)))
        if part >= 100 and rng.random() < 0.25:
            part = part - part % 100 + 99 if part - part % 100 + 99 <= left else part
        parts.append(part)
        left -= part
    return parts


def portal_refund(soak: Soak, actor: str, merchant, order: dict, mch_refund_no: str, amount: int) -> Op:
    """The portal's refund of `order`: the portal's view calls apps.collection.refunds.refund_create for the signed-in
    merchant, as here. This is the one place the soak drives the portal's refunds: where the portal asks a second
    merchant person to approve a refund before it is made, the soak makes and approves it here."""
    from django.db import connection

    from apps.collection.refunds import refund_create
    from apps.common.errors import DomainError

    op = Op(actor, "portal/refund", mch_refund_no, {**refund_params(order, mch_refund_no, amount),
                                                     "merchant_no": merchant.ctx.merchant_no}, time.monotonic())
    try:
        refund = refund_create(merchant=merchant.ctx.merchant, mch_refund_no=mch_refund_no, amount=amount,
                               reason="soak portal", platform_order_no=order["platform_order_no"])
        op.outcome, op.code = "ok", "0"
        op.data = {"refund_no": refund.refund_no, "status": refund.status, "refundable": refund.refundable}
    except DomainError as exc:
        op.outcome, op.code, op.detail = "fail", exc.error.code, exc.msg[:300]
    except Exception as exc:  # noqa: BLE001 - what a merchant person would see as a 500
        op.outcome, op.http_status, op.detail = "error", 500, f"{type(exc).__name__}: {exc}"[:600]
    finally:
        connection.close()
    op.ended = time.monotonic()
    return soak.history.add(op)


def paid_payin(soak: Soak, rng: random.Random, taken: set[str]) -> dict | None:
    """A paid pay-in of a soak merchant this actor has not refunded yet, read from the database (the payers pay
    them over HTTP)."""
    from django.db import connection

    from apps.collection.models import CollectionOrder

    merchants = {m.ctx.merchant_no: m for m in soak.merchants}
    rows = list(CollectionOrder.objects.filter(status=CollectionOrder.Status.SUCCESS,
                                               merchant__merchant_no__in=merchants)
                .exclude(platform_order_no__in=taken)
                .values("platform_order_no", "mch_order_no", "amount", "merchant__merchant_no")[:50])
    connection.close()
    if not rows:
        return None
    order = rows[rng.randrange(len(rows))]
    taken.add(order["platform_order_no"])
    return {**order, "merchant": merchants[order["merchant__merchant_no"]]}


def refunds_actor(soak: Soak, name: str, rng: random.Random) -> None:
    taken: set[str] = set()
    n = 0
    while soak.running() and n < REFUND_LIMIT:
        order = paid_payin(soak, rng, taken)
        if order is None:
            time.sleep(0.5)
            continue
        n += 1
        merchant = order["merchant"]
        prefix = f"S{soak.opts.seed}-{name}-{n}"
        api = [refund_params(order, f"{prefix}-{i}", part) for i, part in enumerate(refund_parts(rng, order["amount"]))]
        portal_amount = rng.randint(1, max(1, order["amount"] // 2))
        at_once([lambda p=p: soak.api(name, merchant, "refund/create", p) for p in api]
                + [lambda: soak.api(name, merchant, "refund/create", api[0]),  # the same refund, twice at once
                   lambda: portal_refund(soak, f"{name}-portal", merchant, order, f"{prefix}-portal", portal_amount)])
        conflicting = {**api[-1], "amount": api[-1]["amount"] + 1}
        soak.api(name, merchant, "refund/create", conflicting)
        beyond = refund_params(order, f"{prefix}-beyond", order["amount"] + 1)
        soak.api(name, merchant, "refund/create", beyond).params["expect"] = "2008"
        time.sleep(rng.uniform(0.1, 0.5))


def refund_expected_balances(merchant_id: int) -> dict:
    """What refunds take from a merchant's balances, from the refund rows alone: SUCCESS left, PROCESSING frozen."""
    from django.db.models import Sum

    from apps.collection.models import Refund

    def total(status: str) -> int:
        return Refund.objects.filter(merchant_id=merchant_id, currency_id="PHP", status=status).aggregate(
            s=Sum("amount"))["s"] or 0

    return {"left": total(Refund.Status.SUCCESS), "frozen": total(Refund.Status.PROCESSING)}


def refund_checks(soak: Soak, ops: list[Op]) -> dict:
    """The refund checks of the run, each {"ok", ...}."""
    from django.conf import settings
    from django.db.models import Sum
    from django.utils import timezone

    from apps.collection.models import CollectionOrder, Refund
    from apps.collection.refunds import REFUND_SWEEP_GRACE
    from apps.ledger.models import Hold

    checks: dict[str, dict] = {}
    giving_back = (Refund.Status.SUCCESS, Refund.Status.PROCESSING)
    beyond = [{"order": o["order__platform_order_no"], "paid": o["order__amount"], "refunded": o["refunded"]}
              for o in Refund.objects.filter(status__in=giving_back).values("order__platform_order_no",
                                                                            "order__amount")
              .annotate(refunded=Sum("amount")) if o["refunded"] > o["order__amount"]]
    unpaid = list(Refund.objects.exclude(order__status=CollectionOrder.Status.SUCCESS)
                  .values_list("refund_no", flat=True)[:8])
    checks["refunds_within_paid"] = check(not beyond and not unpaid, beyond_paid=beyond[:8], of_unpaid_order=unpaid)

    # The sweep finishes a refund whose submission or answer was lost once it is REFUND_SWEEP_GRACE old; the sandbox
    # answers SANDBOX_REFUND_SETTLE_SECONDS after submission: older and still PROCESSING is stuck.
    oldest = timezone.now() - REFUND_SWEEP_GRACE - timedelta(seconds=settings.SANDBOX_REFUND_SETTLE_SECONDS)
    stuck = list(Refund.objects.filter(status=Refund.Status.PROCESSING, created_at__lt=oldest)
                 .values_list("refund_no", "upstream_reference"))
    held_terminal = list(Refund.objects.filter(status__in=Refund.TERMINAL, hold__status=Hold.Status.HELD)
                         .values_list("refund_no", flat=True))
    unheld_waiting = list(Refund.objects.filter(status=Refund.Status.PROCESSING)
                          .exclude(hold__status=Hold.Status.HELD).values_list("refund_no", flat=True))
    waiting = Refund.objects.filter(status=Refund.Status.PROCESSING).count()
    checks["refunds_terminal_or_waiting"] = check(not stuck and not held_terminal and not unheld_waiting,
                                                  stuck=stuck[:8], waiting=waiting, held_on_terminal=held_terminal[:8],
                                                  waiting_without_hold=unheld_waiting[:8])
    checks["refund_history"] = _refund_history(soak, ops)
    return checks


def _refund_history(soak: Soak, ops: list[Op]) -> dict:
    """Every refund answered as made is stored as it was asked, replays answered with the same refund; every refused
    one is absent; a refund beyond what was paid is always 2008."""
    from apps.collection.models import Refund

    sample = soak.history.sample
    stored = {(m, r): (n, a, o) for m, r, n, a, o in Refund.objects.values_list(
        "merchant__merchant_no", "mch_refund_no", "refund_no", "amount", "order__platform_order_no")}
    creates = [op for op in ops if op.kind in ("refund/create", "portal/refund")]
    accepted = {(op.params["merchant_no"], op.key) for op in creates if op.outcome == "ok"}
    problems = []
    for op in creates:
        key = (op.params["merchant_no"], op.key)
        row = stored.get(key)
        if op.params.get("expect") and op.code != op.params["expect"] and op.outcome != "info":
            problems.append({"expected": op.params["expect"], "answered": sample(op)})
        if op.outcome == "ok":
            if row is None:
                problems.append({"accepted_but_absent": sample(op)})
            elif ((op.data or {}).get("refund_no") != row[0] or op.params["amount"] != row[1]
                  or op.params["platform_order_no"] != row[2]):
                problems.append({"accepted_but_different": sample(op), "stored": row})
        elif op.code == "2001":
            if row is None or row[1] == op.params["amount"]:
                problems.append({"conflict_answered_but_stored_matches": sample(op), "stored": row})
        elif op.outcome == "fail" and op.code and op.code[0] in "12" and key not in accepted and row:
            problems.append({"refused_but_stored": sample(op), "stored": row})
    return check(not problems, problems=len(problems), samples=problems[:10])


def refund_figures() -> dict:
    from collections import Counter

    from apps.collection.models import Refund

    return {"refunds": dict(Counter(Refund.objects.values_list("status", flat=True))),
            "refunded_orders": Refund.objects.values("order_id").distinct().count()}
