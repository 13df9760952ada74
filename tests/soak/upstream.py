"""The soak's live deployment: Xendit's and PayMongo's sides, played on their emulators
(tests/channels/xendit_emulator.py, tests/channels/paymongo_emulator.py).

Pay-ins of up to PAYMONGO_MAX_AMOUNT go to PayMongo's Checkout Sessions (its channel comes first in the routing),
larger ones to Xendit's invoices; payouts go to Xendit. Payers open the hosted page (forwarded to the invoice or
the checkout session) from several threads at once; the upstreams' side pays invoices and sessions, settles
disbursements (succeeded, failed, succeeded then reversed) and refunds (succeeded, or accepted and then failed),
and sends the webhooks once, twice at the same moment, late, out of order (the REVERSED one before the SUCCEEDED
one) or never (lost: `reconcile_channels` finds the payout after CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS, the refund
sweep finds the refund after REFUND_SWEEP_GRACE). The emulators also lose the answer of some payout and refund
creates (timeout after creating) or answer 503 (nothing created). Then the check that our books agree with theirs.
"""

import threading
import time
from urllib.parse import urlsplit

import requests

from tests.channels.conftest import (
    PAYIN_CODE,
    PAYMONGO_PAYIN_CODE,
    PAYOUT_CODE,
    paymongo_channel_create,
    xendit_channel_create,
)
from tests.channels.paymongo_emulator import PayMongoEmulator
from tests.channels.xendit_emulator import XenditEmulator

# Pay-ins of up to this amount (PHP minor units, ₱10,000.00) are routed to PayMongo: a fifth of the soak's pay-ins.
PAYMONGO_MAX_AMOUNT = 1_000_000


def live_channels_create(xendit: XenditEmulator, paymongo: PayMongoEmulator) -> None:
    """The live deployment's channels, pointed at the emulators: set up before the stack starts, as the channel tests'
    fixtures make them (never through the admin). PayMongo's pay-in channel comes first for the amounts it serves."""
    from apps.channels.models import Channel

    xendit_channel_create(code=PAYIN_CODE, direction=Channel.Direction.PAYIN, emulator=xendit)
    xendit_channel_create(code=PAYOUT_CODE, direction=Channel.Direction.PAYOUT, emulator=xendit)
    channel = paymongo_channel_create(code=PAYMONGO_PAYIN_CODE, direction=Channel.Direction.PAYIN, emulator=paymongo,
                                      priority=50)
    Channel.objects.filter(pk=channel.pk).update(max_amount=PAYMONGO_MAX_AMOUNT)


class Upstreams:
    """Xendit's and PayMongo's side of the story during the soak; every webhook sent is an op of the history."""

    def __init__(self, soak, emulator: XenditEmulator, paymongo: PayMongoEmulator):
        self.soak, self.emulator, self.paymongo = soak, emulator, paymongo
        self.invoice_url = f"{soak.base}/channels/xendit/{PAYIN_CODE}/webhook"
        self.payout_url = f"{soak.base}/channels/xendit/{PAYOUT_CODE}/webhook"
        self.paymongo_url = f"{soak.base}/channels/paymongo/{PAYMONGO_PAYIN_CODE}/webhook"
        self.late: list[tuple[float, object]] = []
        self.lock = threading.Lock()
        self.paid: set[str] = set()
        self.settled: set[str] = set()
        self.refunds_settled: set[str] = set()

    # --- webhooks -------------------------------------------------------------------------------------------
    def _send(self, actor: str, kind: str, key: str, send) -> None:
        from tests.soak.harness import Op

        op = Op(actor, kind, key, {}, time.monotonic())
        try:
            response = send()
            op.http_status = response.status_code
            op.detail = response.text[:200]
            op.outcome = "error" if response.status_code >= 500 else "ok" if response.status_code == 200 else "fail"
        except requests.RequestException as exc:
            op.detail = type(exc).__name__
        op.ended = time.monotonic()
        self.soak.history.add(op)

    def invoice_webhook(self, actor: str, invoice_id: str) -> None:
        self._send(actor, "xendit/invoice-webhook", invoice_id,
                   lambda: self.emulator.invoice_webhook(invoice_id, self.invoice_url))

    def payout_webhook(self, actor: str, event: str, payout_id: str) -> None:
        self._send(actor, f"xendit/{event}", payout_id,
                   lambda: self.emulator.payout_webhook(event, payout_id, self.payout_url))

    def session_webhook(self, actor: str, session_id: str) -> None:
        self._send(actor, "paymongo/session-webhook", session_id,
                   lambda: self.paymongo.session_webhook(session_id, self.paymongo_url))

    def refund_webhook(self, actor: str, upstream: str, refund_id: str, event: str) -> None:
        if upstream == "xendit":
            self._send(actor, f"xendit/{event}", refund_id,
                       lambda: self.emulator.refund_webhook(event, refund_id, self.invoice_url))
        else:
            self._send(actor, "paymongo/refund-webhook", refund_id,
                       lambda: self.paymongo.refund_webhook(refund_id, self.paymongo_url))

    def deliver(self, actor: str, rng, send, *, may_lose: bool) -> str:
        """Send one webhook as Xendit might: once, twice at the same moment, late, once now and again late, or
        (when it may be lost) never."""
        from tests.soak.harness import at_once

        modes = ["once", "twice", "late", "again-late"] + (["lost"] if may_lose else [])
        mode = rng.choice(modes)
        if mode in ("once", "again-late"):
            send()
        if mode == "twice":
            at_once([send, send])
        if mode in ("late", "again-late"):
            with self.lock:
                self.late.append((time.monotonic() + rng.uniform(2.0, 8.0), send))
        return mode

    def fire_due(self, *, everything: bool = False) -> None:
        now = time.monotonic()
        with self.lock:
            due = [send for at, send in self.late if everything or at <= now]
            self.late = [(at, send) for at, send in self.late if not (everything or at <= now)]
        for send in due:
            send()

    # --- the upstreams decide -----------------------------------------------------------------------------------
    def pay_one(self, actor: str, rng) -> None:
        """The payer pays the invoice or the checkout session the platform forwarded them to."""
        from django.db import connection

        from apps.channels.models import UpstreamPayin

        try:
            opened = list(UpstreamPayin.objects.order_by("id").values_list("platform_order_no", "reference"))
        finally:
            connection.close()
        with self.paymongo._lock:
            sessions = {sid for sid, s in self.paymongo.sessions.items()
                        if s["attributes"]["status"] == "active" and not s["attributes"]["payments"]}
        fresh = [(number, ref) for number, ref in opened if number not in self.paid
                 and (self.emulator.invoices.get(ref, {}).get("status") == "PENDING" or ref in sessions)]
        if not fresh:
            return
        number, reference = fresh[rng.randrange(len(fresh))]
        self.paid.add(number)
        if reference in sessions:
            self.paymongo.pay_session(reference)
            self.deliver(actor, rng, lambda: self.session_webhook(actor, reference), may_lose=False)
        else:
            self.emulator.pay_invoice(reference)
            self.deliver(actor, rng, lambda: self.invoice_webhook(actor, reference), may_lose=False)

    def pending_refunds(self) -> list[tuple[str, str]]:
        """The refunds either upstream accepted and has not decided yet, as (upstream, id), oldest first."""
        with self.emulator._lock:
            xendit = [("xendit", r["id"]) for r in self.emulator.refunds.values() if r["status"] == "PENDING"]
        with self.paymongo._lock:
            paymongo = [("paymongo", r["id"]) for r in self.paymongo.refunds.values()
                        if r["attributes"]["status"] == "pending"]
        return [(upstream, rid) for upstream, rid in xendit + paymongo if rid not in self.refunds_settled]

    def refund_one(self, actor: str, rng, *, outcome: str | None = None) -> bool:
        """The upstream decides one refund it accepted: mostly succeeded, sometimes failed after it was accepted
        (its amount comes back to the merchant); the webhook as `deliver` sends it, or lost (the refund sweep)."""
        pending = self.pending_refunds()
        if not pending:
            return False
        upstream, refund_id = pending[0] if outcome else pending[rng.randrange(len(pending))]
        self.refunds_settled.add(refund_id)
        succeeded = (outcome or rng.choice(["succeeded"] * 5 + ["failed"])) == "succeeded"
        if upstream == "xendit":
            self.emulator.settle_refund(refund_id, "SUCCEEDED" if succeeded else "FAILED")
            event = "refund.succeeded" if succeeded else "refund.failed"
        else:
            self.paymongo.settle_refund(refund_id, "succeeded" if succeeded else "failed")
            event = ""
        self.deliver(actor, rng, lambda: self.refund_webhook(actor, upstream, refund_id, event),
                     may_lose=outcome is None)
        return True

    def settle_one(self, actor: str, rng, *, outcome: str | None = None) -> bool:
        with self.emulator._lock:
            accepted = sorted(p["id"] for p in self.emulator.payouts.values()
                              if p["status"] == "ACCEPTED" and p["id"] not in self.settled)
        if not accepted:
            return False
        payout_id = accepted[0] if outcome else accepted[rng.randrange(len(accepted))]
        self.settled.add(payout_id)
        outcome = outcome or rng.choice(["SUCCEEDED"] * 6 + ["FAILED", "REVERSED", "REVERSED"])
        if outcome == "FAILED":
            self.emulator.settle_payout(payout_id, "FAILED", "INVALID_DESTINATION")
            self.deliver(actor, rng, lambda: self.payout_webhook(actor, "payout.failed", payout_id), may_lose=True)
        elif outcome == "SUCCEEDED":
            self.emulator.settle_payout(payout_id, "SUCCEEDED")
            self.deliver(actor, rng, lambda: self.payout_webhook(actor, "payout.succeeded", payout_id),
                         may_lose=True)
        else:  # paid, then returned by the payee's bank; the REVERSED webhook first, the SUCCEEDED one after it
            self.emulator.settle_payout(payout_id, "SUCCEEDED")
            self.emulator.settle_payout(payout_id, "REVERSED")
            self.deliver(actor, rng, lambda: self.payout_webhook(actor, "payout.reversed", payout_id),
                         may_lose=True)
            with self.lock:
                self.late.append((time.monotonic() + rng.uniform(1.0, 4.0),
                                  lambda: self.payout_webhook(actor, "payout.succeeded", payout_id)))
        return True


def upstream_actor(soak, name: str, upstreams: Upstreams, rng) -> None:
    while soak.running():
        time.sleep(rng.uniform(0.2, 0.7))
        upstreams.fire_due()
        roll = rng.random()
        if roll < 0.4:
            upstreams.pay_one(name, rng)
        elif roll < 0.75:
            upstreams.settle_one(name, rng)
        else:
            upstreams.refund_one(name, rng)
        if rng.random() < 0.04:  # the answer of a payout create lost after creating, or a 503 without creating
            upstreams.emulator.fail_next("payouts", rng.choice(["timeout", "5xx"]))
        if rng.random() < 0.03:  # the same for a refund create, at either upstream
            rng.choice([upstreams.emulator, upstreams.paymongo]).fail_next("refunds", rng.choice(["timeout", "5xx"]))


def upstream_finish(upstreams: Upstreams, rng) -> None:
    """The quiet period: the upstreams decide every disbursement and refund still open (succeeded, webhook once) and
    send every late webhook."""
    while upstreams.settle_one("upstream-quiet", rng, outcome="SUCCEEDED"):
        pass
    while upstreams.refund_one("upstream-quiet", rng, outcome="succeeded"):
        pass
    upstreams.fire_due(everything=True)


def live_payer_actor(soak, name: str, rng) -> None:
    """Payers open the hosted page from several threads at once: each is forwarded to the order's one invoice (two
    first openings racing may open two; the loser's is expired: docs/channels.md)."""
    from tests.soak.harness import Op, at_once

    opened: set[str] = set()
    while soak.running():
        order = soak.next_payin(rng, opened)
        if order is None:
            continue
        url = soak.base + urlsplit(order["data"]["pay_url"]).path

        def open_page():
            op = Op(name, "pay/open", order["data"]["platform_order_no"], {}, time.monotonic())
            try:
                response = requests.get(url, allow_redirects=False, timeout=20)
                op.http_status = response.status_code
                op.detail = response.headers.get("Location", "")[:120]
                op.outcome = "error" if response.status_code >= 500 else "ok" if response.status_code == 302 \
                    else "fail"
            except requests.RequestException as exc:
                op.detail = type(exc).__name__
            op.ended = time.monotonic()
            soak.history.add(op)

        at_once([open_page] * rng.randint(1, 3))
        time.sleep(rng.uniform(0.05, 0.3))


def upstream_agrees(emulator: XenditEmulator, paymongo: PayMongoEmulator) -> dict:
    """Our books and the upstreams' say the same: one disbursement per payout, each outcome the upstream's (a payout
    returned upstream is reversed here; operations may also reverse one Xendit paid); an order is paid exactly when
    the invoice or checkout session it was forwarded to is paid; one upstream refund at most per refund of ours,
    for its amount, SUCCESS exactly when the upstream's succeeded (a refund with none upstream was refused there)."""
    from apps.collection.models import CollectionOrder, Refund
    from apps.payout.models import Payout

    problems = []
    with emulator._lock:
        upstream = [dict(p) for p in emulator.payouts.values()]
        invoices = {i["id"]: dict(i) for i in emulator.invoices.values()}
        xendit_refunds = [dict(r) for r in emulator.refunds.values()]
    with paymongo._lock:
        sessions = [s["attributes"] for s in paymongo.sessions.values()]
        paymongo_refunds = [r["attributes"] for r in paymongo.refunds.values()]
    by_reference: dict[str, list[dict]] = {}
    for disbursement in upstream:
        by_reference.setdefault(disbursement["reference_id"], []).append(disbursement)
    ours = {p.platform_order_no: p for p in Payout.objects.all()}
    for number, payout in ours.items():
        found = by_reference.get(number, [])
        status = found[0]["status"] if found else None
        wrong = (len(found) > 1
                 or payout.status == "SUCCESS" and status not in ("SUCCEEDED", "REVERSED")
                 or payout.status == "FAILED" and status not in (None, "FAILED")
                 or payout.status == "REJECTED" and found
                 or status == "REVERSED" and not payout.reversed_at  # ops may reverse a SUCCEEDED one too
                 or status == "SUCCEEDED" and payout.status != "SUCCESS")
        if wrong:
            problems.append({"payout": number, "ours": payout.status, "reversed": bool(payout.reversed_at),
                             "xendit": [d["status"] for d in found]})
    problems += [{"disbursement_of_no_order": ref} for ref in by_reference if ref not in ours]
    paid = {i["external_id"] for i in invoices.values() if i["status"] == "PAID"}
    paid |= {s["reference_number"] for s in sessions if s["payments"]}
    for number, status in CollectionOrder.objects.values_list("platform_order_no", "status"):
        if (status == "SUCCESS") != (number in paid):
            problems.append({"payin": number, "ours": status, "upstream_paid": number in paid})

    # Refunds, by our refund_no: Xendit's reference_id, PayMongo's metadata.
    theirs: dict[str, list[tuple[int, str]]] = {}
    for refund in xendit_refunds:
        theirs.setdefault(refund["reference_id"], []).append((int(refund["amount"] * 100), refund["status"].lower()))
    for refund in paymongo_refunds:
        number = (refund.get("metadata") or {}).get("refund_no", "")
        theirs.setdefault(number, []).append((refund["amount"], refund["status"]))
    refunds = {r.refund_no: r for r in Refund.objects.all()}
    for number, refund in refunds.items():
        found = theirs.get(number, [])
        status = found[0][1] if found else None
        wrong = (len(found) > 1 or found and found[0][0] != refund.amount
                 or (refund.status == "SUCCESS") != (status == "succeeded")
                 or refund.status == "FAILED" and status not in (None, "failed"))
        if wrong:
            problems.append({"refund": number, "ours": [refund.status, refund.amount], "upstream": found})
    problems += [{"upstream_refund_of_no_refund": number} for number in theirs if number not in refunds]
    return {"ok": not problems, "problems": len(problems), "samples": problems[:10],
            "disbursements": len(upstream), "invoices": len(invoices), "sessions": len(sessions),
            "upstream_refunds": len(xendit_refunds) + len(paymongo_refunds)}
