"""The soak's live deployment: Xendit's side, played on the emulator (tests/channels/xendit_emulator.py).

Payers open the hosted page (forwarded to the invoice) from several threads at once; Xendit's side pays invoices and
settles disbursements (succeeded, failed, succeeded then reversed), and sends the webhooks once, twice at the same
moment, late, out of order (the REVERSED one before the SUCCEEDED one) or never (lost: `reconcile_channels` finds
the payout after CHANNEL_RECONCILE_PAYOUT_AFTER_SECONDS). The emulator also loses the answer of some payout creates
(timeout after creating) or answers 503 (nothing created). Then the check that our books agree with Xendit's.
"""

import threading
import time
from urllib.parse import urlsplit

import requests

from tests.channels.conftest import PAYIN_CODE, PAYOUT_CODE, xendit_channel_create
from tests.channels.xendit_emulator import XenditEmulator


def xendit_channels_create(emulator: XenditEmulator) -> None:
    """The live deployment's channels, pointed at the emulator: set up before the stack starts, as the Xendit tests'
    fixture makes them (never through the admin)."""
    from apps.channels.models import Channel

    xendit_channel_create(code=PAYIN_CODE, direction=Channel.Direction.PAYIN, emulator=emulator)
    xendit_channel_create(code=PAYOUT_CODE, direction=Channel.Direction.PAYOUT, emulator=emulator)


class Xendit:
    """Xendit's side of the story during the soak; every webhook sent is an op of the history."""

    def __init__(self, soak, emulator: XenditEmulator):
        self.soak, self.emulator = soak, emulator
        self.invoice_url = f"{soak.base}/channels/xendit/{PAYIN_CODE}/webhook"
        self.payout_url = f"{soak.base}/channels/xendit/{PAYOUT_CODE}/webhook"
        self.late: list[tuple[float, object]] = []
        self.lock = threading.Lock()
        self.paid: set[str] = set()
        self.settled: set[str] = set()

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

    # --- Xendit decides ---------------------------------------------------------------------------------------
    def pay_one(self, actor: str, rng) -> None:
        """The payer pays the invoice the platform forwarded them to."""
        from django.db import connection

        from apps.channels.models import UpstreamPayin

        try:
            opened = list(UpstreamPayin.objects.order_by("id").values_list("platform_order_no", "reference"))
        finally:
            connection.close()
        fresh = [ref for number, ref in opened if number not in self.paid
                 and self.emulator.invoices.get(ref, {}).get("status") == "PENDING"]
        if not fresh:
            return
        reference = fresh[rng.randrange(len(fresh))]
        self.paid.add(self.emulator.invoices[reference]["external_id"])
        self.emulator.pay_invoice(reference)
        self.deliver(actor, rng, lambda: self.invoice_webhook(actor, reference), may_lose=False)

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


def upstream_actor(soak, name: str, xendit: Xendit, rng) -> None:
    n = 0
    while soak.running() and n < 5000:
        n += 1
        time.sleep(rng.uniform(0.2, 0.7))
        xendit.fire_due()
        if rng.random() < 0.5:
            xendit.pay_one(name, rng)
        else:
            xendit.settle_one(name, rng)
        if rng.random() < 0.04:  # the answer of a payout create lost after creating, or a 503 without creating
            xendit.emulator.fail_next("payouts", rng.choice(["timeout", "5xx"]))


def upstream_finish(xendit: Xendit, rng) -> None:
    """The quiet period: Xendit decides every disbursement still open (succeeded, webhook once) and sends every
    late webhook."""
    while xendit.settle_one("xendit-quiet", rng, outcome="SUCCEEDED"):
        pass
    xendit.fire_due(everything=True)


def live_payer_actor(soak, name: str, rng) -> None:
    """Payers open the hosted page from several threads at once: each is forwarded to the order's one invoice (two
    first openings racing may open two; the loser's is expired: docs/channels.md)."""
    from tests.soak.harness import Op, at_once

    opened: set[str] = set()
    n = 0
    while soak.running() and n < 2000:
        n += 1
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


def upstream_agrees(emulator: XenditEmulator) -> dict:
    """Our books and Xendit's say the same: one disbursement per payout, each outcome the upstream's (a payout
    returned upstream is reversed here; operations may also reverse one Xendit paid); an order is paid exactly when
    the invoice it was forwarded to is paid."""
    from apps.collection.models import CollectionOrder
    from apps.payout.models import Payout

    problems = []
    with emulator._lock:
        upstream = [dict(p) for p in emulator.payouts.values()]
        invoices = {i["id"]: dict(i) for i in emulator.invoices.values()}
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
    paid_invoices = {i["external_id"] for i in invoices.values() if i["status"] == "PAID"}
    for number, status in CollectionOrder.objects.values_list("platform_order_no", "status"):
        if (status == "SUCCESS") != (number in paid_invoices):
            problems.append({"payin": number, "ours": status, "xendit_paid": number in paid_invoices})
    return {"ok": not problems, "problems": len(problems), "samples": problems[:10],
            "disbursements": len(upstream), "invoices": len(invoices)}
