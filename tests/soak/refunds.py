"""Refunds in the soak (docs/testing.md, "Refunds in the soak"): merchants refund paid pay-ins in parts through the
signed API while payers go on paying, and at the same moment the merchant's people refund the same orders through
the portal's pages.

Per paid pay-in the `refunds` actor releases together, from threads of their own: two or three partial refunds over
`refund/create` (some ending in 99, which the sandbox fails), an identical replay of one of them, and the portal's
refund (its finance person asks on the pay-in's page, an owner approves with a fresh authenticator code, over HTTP
in browser sessions signed in at the start); then a conflicting replay (same mch_refund_no, another amount: 2001)
and a refund of more than the order was paid (always 2008). Both deployments: the sandbox's channel answers the
refunds by its rule, the live one's go to Xendit's and PayMongo's emulators (tests/soak/upstream.py), which decide
them and send (or lose) their webhooks.

The checks read the database after the quiet period: no order refunded beyond what was paid, every refund terminal
or legitimately waiting, and each answer of the history as the database has it. The callbacks and the ledger's
balances take refunds into account in the harness's own checks (tests/soak/harness.py).
"""

import random
import re
import time
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

import requests

from tests.soak.harness import Op, Soak, at_once, check
from tests.soak.insider import Person, messages

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


PORTAL_OWNERS = 4  # owners per merchant who approve the portal's refunds: each takes one fresh code per 30 s
REFUND_NUMBER = re.compile(r'<dt>Refund number</dt><dd class="mono">([^<]+)</dd>')
APPROVED = re.compile(r"Approved: refund (\w+) is on its way")
CODE = re.compile(r"\b([12]\d{3})\b")


@dataclass
class PortalDesk:
    """A soak merchant's people in the portal, each signed in over HTTP (password, then the authenticator's code) in
    a browser session of their own: a finance person who asks for refunds and owners who approve them."""

    finance: Person
    owners: list[Person]
    turn: int = 0

    def owner(self) -> Person:
        """The owner whose authenticator shows a code not used yet, the next in turn when several do (a code is
        taken once: an owner who just approved waits for the next one)."""
        from django.db import connection
        from django_otp.plugins.otp_totp.models import TOTPDevice

        last = dict(TOTPDevice.objects.filter(user__username__in=[o.username for o in self.owners], confirmed=True)
                    .values_list("user__username", "last_t"))
        connection.close()
        now = int(time.time() // 30)
        order = self.owners[self.turn:] + self.owners[:self.turn]
        self.turn = (self.turn + 1) % len(self.owners)
        free = [o for o in order if (last.get(o.username) or -1) < now + 1]
        return free[0] if free else min(order, key=lambda o: last.get(o.username) or -1)


def portal_desks_set_up(base: str, merchants: list) -> dict[str, PortalDesk]:
    """For each soak merchant, from the server's shell (no person named, so independent people): a finance person and
    PORTAL_OWNERS owners, each signed in to the portal through its pages, by merchant_no."""
    from django.db import connection

    from tests.portal.support import portal_user
    from tests.support.staff import PASSWORD as portal_password

    desks = {}
    for merchant in merchants:
        people = []
        for role, count in (("finance", 1), ("owner", PORTAL_OWNERS)):
            for i in range(count):
                user = portal_user(merchant.ctx.merchant, role, username=f"{role}{i}@soak-{merchant.index}.example")
                people.append(Person(base, user.username, portal_password))
        connection.close()
        for person in people:
            person.portal_sign_in()
        desks[merchant.ctx.merchant_no] = PortalDesk(people[0], people[1:])
    return desks


def portal_refund(soak: Soak, actor: str, desk: PortalDesk, merchant, order: dict, amount: int) -> Op | None:
    """The portal's refund of `order`, through its pages as merchant people do it: the finance person asks on the
    paid pay-in's page (op `portal/refund-ask`), then an owner approves the request with a fresh authenticator code
    (op `portal/refund`, keyed by the request's refund number as the request page shows it). The approval makes the
    refund through refund_create exactly as refund/create does; what it says is what the person read."""
    params = {"platform_order_no": order["platform_order_no"], "amount": amount,
              "merchant_no": merchant.ctx.merchant_no}
    asked = _portal_step(soak, actor, "portal/refund-ask", order["platform_order_no"], params, lambda: (
        desk.finance.get(f"/portal/payins/{order['platform_order_no']}/"),
        desk.finance.post(f"/portal/payins/{order['platform_order_no']}/refund/",
                          {"amount": f"{amount // 100}.{amount % 100:02d}", "reason": "soak portal"}))[-1])
    page = (asked.data or {}).pop("html", "")
    number = REFUND_NUMBER.search(page) if asked.outcome == "ok" else None
    request_path = urlsplit((asked.data or {}).get("url", "")).path
    if number is None or "/refunds/requests/" not in request_path:
        return None
    owner = desk.owner()
    return _portal_step(soak, actor, "portal/refund", number.group(1), params,
                        lambda: owner.post(f"{request_path}approve/", {"code": owner.code()}))


def _portal_step(soak: Soak, actor: str, kind: str, key: str, params: dict, fn) -> Op:
    """One person's form post in the portal: ok when the page's message says it was done, fail (with the contract's
    code the message names) when it says it was not."""
    op = Op(actor, kind, key, dict(params), time.monotonic())
    op.data = {}
    try:
        response = fn()
        said = messages(response)
        op.http_status, op.detail = response.status_code, " | ".join(said)[:400]
        op.data = {"messages": said, "url": response.url, "html": response.text}
        done = [m for m in said if m.startswith(("Refund request #", "Approved: refund"))]
        refused = [m for m in said if m.startswith(("Not asked for", "Not approved", "Approved, but"))]
        if response.status_code >= 500:
            op.outcome = "error"
        elif any(m.startswith("Approved: the refund is being made") for m in said):
            op.outcome = "info"  # approved; the refund is made after the page (the beat finishes it if lost)
        elif done:
            op.outcome = "ok"
            if found := APPROVED.search(done[0]):
                op.code, op.data["refund_no"] = "0", found.group(1)
        else:
            op.outcome = "fail"
            code = CODE.search(refused[0]) if refused else None
            op.code = code.group(1) if code else None
    except requests.RequestException as exc:
        op.detail = type(exc).__name__
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


def refunds_actor(soak: Soak, name: str, desks: dict[str, PortalDesk], rng: random.Random) -> None:
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
                   lambda: portal_refund(soak, f"{name}-portal", desks[merchant.ctx.merchant_no], merchant, order,
                                         portal_amount)])
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
