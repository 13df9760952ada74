"""A real HTTP emulator of the documented Xendit endpoints on 127.0.0.1 (no traffic leaves the machine), at the paths
xendit-python 7.0.0 (Xendit's SDK, generated from its OpenAPI specs) calls, answering what its models read
(tests/channels/test_xendit_sdk.py drives the SDK's own client against it and reads every answer with its models):

  POST /v2/invoices/ (the SDK's path) and POST /v2/invoices (the documented curl), GET /v2/invoices/{id},
  GET /v2/invoices?external_id=&limit=&last_invoice_id= (a JSON array, as documented, newest first: `limit`
  invoices, default 10, after the one `last_invoice_id` names), POST /invoices/{id}/expire! (expires a PENDING
  invoice), GET /web/invoices/{id} (the hosted invoice page the payer lands on). An invoice carries every field the
  SDK's Invoice model requires (merchant_profile_picture_url, available_banks/_retail_outlets/_ewallets/_qr_codes/
  _direct_debits/_paylaters, should_send_email, ...); states PENDING, PAID, SETTLED, EXPIRED.
  POST /v2/payouts (Idempotency-key required). A reused key answers as Xendit documents it: the same body → the
  first attempt's payout again (200), a different body → 409 DUPLICATE_ERROR. `reused_key="409"` scripts an
  upstream that refuses every reuse with 409 (the harder case for the adapter). The payout object does not show
  its idempotency key (as documented); the emulator's own record of it is `idempotency_keys`. `failure_code` is
  present only on a FAILED payout and is one of the documented codes (the SDK refuses `null` and others).
  GET /v2/payouts/{id}, GET /v2/payouts?reference_id=&limit=&after_id= ({"data": [...], "has_more": ..., "links":
  the next page's {href, rel, method} while more follow}, newest first, `limit` payouts, default 10, after `after_id`),
  POST /v2/payouts/{id}/cancel (an ACCEPTED payout → CANCELLED),
  GET /payouts_channels?currency=&channel_category=&channel_code= (the channel objects of `payout_channels`:
  channel_code, channel_category, currency, channel_name, amount_limits).
  Errors are {"error_code", "message"} with the documented status (401 INVALID_API_KEY, 404 ..._NOT_FOUND, 409
  DUPLICATE_ERROR, 400 API_VALIDATION_ERROR, 429 RATE_LIMIT_EXCEEDED, 503 SERVER_ERROR).

Lists as a real upstream may answer them: `page_limit` caps a page below the `limit` asked for, `ignore_filters=True`
answers every payout / invoice whatever `reference_id` / `external_id` asks (the adapter must page and match our
reference itself), `ignore_cursor=True` answers the first page whatever the cursor names, `payouts_of_others(n)` / `invoices_of_others(n)` add objects of other references, newer than
ours, and `fail_next_page("5xx" | "429", ...)` scripts the next list requests for a page after the first.

Refunds (xendit-python's RefundApi and Refund models): POST /refunds (invoice_id, reference_id, amount, currency,
reason one of the documented values; an `Idempotency-key` header: the same key and body answer the first refund
again, another body 409 IDEMPOTENCY_ERROR; a reference_id already used 409 DUPLICATE_ERROR; an invoice not PAID/SETTLED
400 INELIGIBLE_TRANSACTION; more than is left unrefunded 400 MAXIMUM_REFUND_AMOUNT_REACHED; a payment by QR Ph 400
REFUND_NOT_SUPPORTED), GET /refunds/{id}, GET /refunds?invoice_id=&payment_request_id=&limit=&after_id= ({"data":
[...], "has_more": ...}, newest first, the documented filters only: a `reference_id` in the query is ignored, as by
an API that does not document it). A refund is created PENDING; `settle_refund` moves it to SUCCEEDED or FAILED (a
refund accepted and then failed), `refund_webhook` POSTs the documented refund.succeeded / refund.failed body.

HTTP Basic auth with the secret key as user name. Scripted faults on the creates: `emulator.fail_next("payouts",
"timeout")` processes the request and then stalls past the client's timeout (the answer is lost, the object
exists), `"5xx"` answers 503 without creating anything, `"429"` answers Xendit's RATE_LIMIT_EXCEEDED without
creating anything, `"400"` refuses it without creating anything (a payout INVALID_DESTINATION, a refund
REFUND_NOT_SUPPORTED); the same for `fail_next("refunds", ...)`, whose "5xx" is the Refund API's 503
CHANNEL_UNAVAILABLE.
The test plays Xendit's side: `pay_invoice`, `settle_invoice`,
`settle_payout`, ... change the objects, and `invoice_webhook` / `payout_webhook` POST the documented webhook bodies
with an x-callback-token to our endpoint. Every answer is kept in `answers` (method, path, status, body).
"""

import base64
import json
import secrets
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import requests

# Payout statuses and failure codes as documented (xendit-python's Payout model enumerates them).
PAYOUT_STATUSES = ("ACCEPTED", "REQUESTED", "LOCKED", "SUCCEEDED", "FAILED", "CANCELLED", "REVERSED")
PAYOUT_FAILURE_CODES = ("INSUFFICIENT_BALANCE", "REJECTED_BY_CHANNEL", "TEMPORARY_TRANSFER_ERROR",
                        "INVALID_DESTINATION", "TRANSFER_ERROR")
# Refund statuses, reasons (xendit-python's CreateRefund enumerates them) and the failure codes a refund.failed webhook
# carries (Xendit's refund webhook and QR test scenarios).
REFUND_STATUSES = ("PENDING", "SUCCEEDED", "FAILED", "CANCELLED")
REFUND_REASONS = ("FRAUDULENT", "DUPLICATE", "REQUESTED_BY_CUSTOMER", "CANCELLATION", "OTHERS")
REFUND_FAILURE_CODES = ("ACCOUNT_ACCESS_BLOCKED", "ACCOUNT_NOT_FOUND", "DUPLICATE_ERROR", "INSUFFICIENT_BALANCE",
                        "REFUND_FAILED", "INELIGIBLE_TRANSACTION")
# Payment channels whose payments Xendit's Refund API does not refund (QR Ph).
UNREFUNDABLE_CHANNELS = ("QRPH",)
# What a scripted "400" answers: a refund's refusal, else the payout's (also for an invoice).
_REJECTIONS = {"refunds": ("REFUND_NOT_SUPPORTED", "refund is not supported for this payment")}
_REJECTION = ("INVALID_DESTINATION", "account not found")


def _channel(code: str, category: str, currency: str, name: str, maximum: int = 50000) -> dict:
    return {"channel_code": code, "channel_category": category, "currency": currency, "channel_name": name,
            "amount_limits": {"minimum": 1, "maximum": maximum, "minimum_increment": 0.01}}


# GET /payouts_channels: Xendit's PH banks and e-wallets (InstaPay's limit 50,000 PHP), a few of Indonesia's and
# Thailand's for the currency filter. The emulator's list; a test removes a code to play a channel Xendit stopped
# supporting.
PAYOUT_CHANNELS = [
    _channel("PH_AUB", "BANK", "PHP", "Asia United Bank"),
    _channel("PH_BDO", "BANK", "PHP", "Banco de Oro Unibank, Inc."),
    _channel("PH_BPI", "BANK", "PHP", "Bank of the Philippine Islands"),
    _channel("PH_CBC", "BANK", "PHP", "China Banking Corporation"),
    _channel("PH_CTBC", "BANK", "PHP", "CTBC Bank (Philippines) Corp."),
    _channel("PH_DBP", "BANK", "PHP", "Development Bank of the Philippines"),
    _channel("PH_EWB", "BANK", "PHP", "East West Banking Corporation"),
    _channel("PH_LBP", "BANK", "PHP", "Land Bank of the Philippines"),
    _channel("PH_MET", "BANK", "PHP", "Metropolitan Bank and Trust Company"),
    _channel("PH_ONB", "BANK", "PHP", "BDO Network Bank, Inc."),
    _channel("PH_PNB", "BANK", "PHP", "Philippine National Bank"),
    _channel("PH_PSB", "BANK", "PHP", "Philippine Savings Bank"),
    _channel("PH_RCBC", "BANK", "PHP", "Rizal Commercial Banking Corporation"),
    _channel("PH_SEC", "BANK", "PHP", "Security Bank Corporation"),
    _channel("PH_UBP", "BANK", "PHP", "Union Bank of the Philippines"),
    _channel("PH_GCASH", "EWALLET", "PHP", "GCash"),
    _channel("PH_GRABPAY", "EWALLET", "PHP", "GrabPay"),
    _channel("PH_PAYMAYA", "EWALLET", "PHP", "Maya"),
    _channel("ID_BCA", "BANK", "IDR", "Bank Central Asia (BCA)", maximum=1_000_000_000),
    _channel("ID_OVO", "EWALLET", "IDR", "OVO", maximum=10_000_000),
    _channel("TH_BBL", "BANK", "THB", "Bangkok Bank", maximum=2_000_000),
]

# What a PHP invoice offers the payer (the SDK's enums: EwalletType, QrCodeType, DirectDebitType).
_PHP_INVOICE_METHODS = {
    "available_ewallets": [{"ewallet_type": "GCASH"}, {"ewallet_type": "PAYMAYA"}, {"ewallet_type": "GRABPAY"}],
    "available_qr_codes": [{"qr_code_type": "QRPH"}],
    "available_direct_debits": [{"direct_debit_type": "DD_BPI"}, {"direct_debit_type": "DD_UBP"}],
}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _encode(obj) -> bytes:
    return json.dumps(obj, default=lambda value: float(value) if isinstance(value, Decimal) else str(value)).encode()


def _error(code: str, message: str) -> dict:
    return {"error_code": code, "message": message}


class XenditEmulator:
    def __init__(self, *, secret_key: str = "xnd_development_emulator", callback_token: str = "emulator-token",
                 stall_seconds: float = 3.0, reused_key: str = "replay", page_limit: int = 100,
                 ignore_filters: bool = False):
        self.secret_key = secret_key
        self.callback_token = callback_token
        self.stall_seconds = stall_seconds
        self.invoices: dict[str, dict] = {}
        self.payouts: dict[str, dict] = {}
        self.payout_channels: list[dict] = [dict(channel) for channel in PAYOUT_CHANNELS]
        self.idempotency_keys: dict[str, str] = {}  # key → the payout it created
        self._idempotency_bodies: dict[str, dict] = {}
        self.refunds: dict[str, dict] = {}
        self.refund_keys: dict[str, str] = {}  # Idempotency-key → the refund it created
        self._refund_bodies: dict[str, dict] = {}
        self.refund_create_delay = 0.0  # seconds a refund create waits before Xendit takes it
        self.reused_key = reused_key  # "replay": as documented; "409": every reuse refused
        self.page_limit = page_limit
        self.ignore_filters = ignore_filters
        self.ignore_cursor = False
        self.requests: list[tuple[str, str, dict, bytes]] = []
        self.answers: list[tuple[str, str, int, object]] = []  # (method, path, status, body) of every JSON answer
        self._faults: dict[str, list[str]] = {"invoices": [], "payouts": [], "refunds": [], "pages": []}
        # Called (in the server's thread) after an invoice is created, before it is answered: a test's race.
        self.on_invoice_created = None
        self._lock = threading.Lock()
        emulator = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                emulator._handle(self, "GET")

            def do_POST(self):  # noqa: N802
                emulator._handle(self, "POST")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # --- lifecycle ------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> "XenditEmulator":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def fail_next(self, endpoint: str, *modes: str) -> None:
        """Script the next creates of `endpoint` ('invoices', 'payouts' or 'refunds'): 'timeout', '5xx', '429' or
        '400' each."""
        with self._lock:
            self._faults[endpoint].extend(modes)

    def fail_next_page(self, *modes: str) -> None:
        """Script the next list requests for a page after the first (they carry a cursor): '5xx' or '429' each."""
        with self._lock:
            self._faults["pages"].extend(modes)

    # --- Xendit's side of the story ---------------------------------------------------------------------------

    def payouts_of_others(self, count: int, *, amount: int = 150000, currency: str = "PHP") -> list[str]:
        """`count` payouts someone else on the account made (other reference_ids), newer than every one before."""
        created = []
        with self._lock:
            for _ in range(count):
                key = "other-" + secrets.token_hex(8)
                status, payout = self._payout_create(
                    {"reference_id": f"OTHER-{secrets.token_hex(6)}", "channel_code": "PH_GCASH", "amount": amount,
                     "currency": currency, "channel_properties": {"account_number": "09170000000",
                                                                  "account_holder_name": "Someone Else"}},
                    {"Idempotency-key": key})
                assert status == 200, payout
                created.append(payout["id"])
        return created

    def invoices_of_others(self, count: int, *, amount: int = 20000, currency: str = "PHP") -> list[str]:
        """`count` invoices of other external_ids, newer than every one before."""
        with self._lock:
            return [self._invoice_create({"external_id": f"OTHER-{secrets.token_hex(6)}", "amount": amount,
                                          "currency": currency})[1]["id"] for _ in range(count)]

    def pay_invoice(self, invoice_id: str, *, method: str = "EWALLET", channel: str = "GCASH") -> dict:
        """The payer pays the invoice by `method` (the SDK's InvoicePaymentMethod) through `channel` ("GCASH",
        "QRPH", ...), as the invoice then shows them (payment_method, payment_channel)."""
        with self._lock:
            invoice = self.invoices[invoice_id]
            invoice.update(status="PAID", paid_amount=invoice["amount"], paid_at=_now(), updated=_now(),
                           payment_method=method, payment_channel=channel,
                           payment_id=f"{method.lower()}_" + secrets.token_hex(12))
            return dict(invoice)

    def settle_invoice(self, invoice_id: str) -> dict:
        """A PAID invoice whose funds reached the balance: SETTLED (documented; our adapter reads it as paid)."""
        with self._lock:
            invoice = self.invoices[invoice_id]
            if invoice["status"] != "PAID":
                raise ValueError(f"invoice {invoice_id} is {invoice['status']}, not PAID")
            invoice.update(status="SETTLED", updated=_now())
            return dict(invoice)

    def expire_invoice(self, invoice_id: str) -> dict:
        with self._lock:
            self.invoices[invoice_id].update(status="EXPIRED", updated=_now())
            return dict(self.invoices[invoice_id])

    def settle_payout(self, payout_id: str, status: str, failure_code: str | None = None) -> dict:
        """Move a payout to a documented status; a FAILED one carries a documented failure_code (default
        TRANSFER_ERROR), any other carries none (the SDK's model refuses a null or unknown one)."""
        if status not in PAYOUT_STATUSES:
            raise ValueError(f"{status!r} is not a documented payout status")
        if status == "FAILED":
            failure_code = failure_code or "TRANSFER_ERROR"
            if failure_code not in PAYOUT_FAILURE_CODES:
                raise ValueError(f"{failure_code!r} is not a documented failure_code ({PAYOUT_FAILURE_CODES})")
        elif failure_code is not None:
            raise ValueError("only a FAILED payout has a failure_code")
        with self._lock:
            payout = self.payouts[payout_id]
            payout.pop("failure_code", None)
            payout.update(status=status, updated=_now(), **({"failure_code": failure_code} if failure_code else {}))
            return dict(payout)

    def settle_refund(self, refund_id: str, status: str, failure_code: str | None = None) -> dict:
        """Xendit's answer on a refund: SUCCEEDED, or FAILED with a documented failure_code (default REFUND_FAILED),
        also after it was accepted (PENDING), which gives its amount back to the invoice's refundable."""
        if status not in REFUND_STATUSES:
            raise ValueError(f"{status!r} is not a refund status")
        if status == "FAILED":
            failure_code = failure_code or "REFUND_FAILED"
            if failure_code not in REFUND_FAILURE_CODES:
                raise ValueError(f"{failure_code!r} is not a refund failure code ({REFUND_FAILURE_CODES})")
        elif failure_code is not None:
            raise ValueError("only a FAILED refund has a failure_code")
        with self._lock:
            refund = self.refunds[refund_id]
            refund.update(status=status, failure_code=failure_code, updated=_now())
            return dict(refund)

    def refunds_by_reference(self, reference_id: str) -> list[dict]:
        return [r for r in self.refunds.values() if r["reference_id"] == reference_id]

    def refund_webhook(self, event: str, refund_id: str, url: str, *, token: str | None = None,
                       data: dict | None = None):
        """Xendit's refund webhook (refund.succeeded / refund.failed): {event, business_id, created, data: <refund>}."""
        with self._lock:
            payload = {"event": event, "business_id": "emulator-business", "created": _now(),
                       "data": data if data is not None else dict(self.refunds[refund_id])}
        return requests.post(url, data=_encode(payload), timeout=30,
                             headers={"Content-Type": "application/json",
                                      "x-callback-token": self.callback_token if token is None else token})

    def invoice_by_external_id(self, external_id: str) -> list[dict]:
        return [i for i in self.invoices.values() if i["external_id"] == external_id]

    def payouts_by_reference(self, reference_id: str) -> list[dict]:
        return [p for p in self.payouts.values() if p["reference_id"] == reference_id]

    def invoice_webhook(self, invoice_id: str, url: str, *, token: str | None = None, body: dict | None = None):
        """Xendit's invoice callback: the invoice object itself (status PAID / EXPIRED)."""
        with self._lock:
            payload = body if body is not None else dict(self.invoices[invoice_id])
        return requests.post(url, data=_encode(payload), timeout=30,
                             headers={"Content-Type": "application/json",
                                      "x-callback-token": self.callback_token if token is None else token})

    def payout_webhook(self, event: str, payout_id: str, url: str, *, token: str | None = None,
                       data: dict | None = None):
        """Xendit's payout webhook: {event, business_id, created, data: <payout>}."""
        with self._lock:
            payload = {"event": event, "business_id": "emulator-business", "created": _now(),
                       "data": data if data is not None else dict(self.payouts[payout_id])}
        return requests.post(url, data=_encode(payload), timeout=30,
                             headers={"Content-Type": "application/json",
                                      "x-callback-token": self.callback_token if token is None else token})

    # --- HTTP -------------------------------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        parts = urlsplit(handler.path)
        with self._lock:
            self.requests.append((method, handler.path, dict(handler.headers), raw))
        if parts.path.startswith("/web/invoices/"):
            return self._html(handler, parts.path.rsplit("/", 1)[-1])
        if not self._authorized(handler):
            return self._reply(handler, 401, _error("INVALID_API_KEY", "API key is invalid"))
        try:
            body = json.loads(raw, parse_float=Decimal) if raw else {}
        except ValueError:
            return self._reply(handler, 400, _error("API_VALIDATION_ERROR", "invalid JSON"))
        segments = [s for s in parts.path.split("/") if s]
        query = parse_qs(parts.query)
        if method == "POST" and parts.path in ("/v2/invoices", "/v2/invoices/"):
            return self._create(handler, "invoices", lambda: self._invoice_create(body))
        if method == "POST" and parts.path == "/v2/payouts":
            return self._create(handler, "payouts", lambda: self._payout_create(body, handler.headers))
        if method == "POST" and parts.path == "/refunds":
            return self._create(handler, "refunds", lambda: self._refund_create(body, handler.headers))
        if method == "GET" and segments[:1] == ["refunds"] and len(segments) == 2:
            found = self.refunds.get(segments[1])
            return self._reply(handler, 200, found) if found else self._reply(
                handler, 404, _error("DATA_NOT_FOUND", "Refund not found"))
        if method == "GET" and parts.path == "/refunds":
            filters = {name: query[name][0] for name in ("invoice_id", "payment_request_id") if query.get(name)}
            with self._lock:
                listed = [dict(r) for r in reversed(self.refunds.values())
                          if self.ignore_filters or all(r.get(name) == value for name, value in filters.items())]
            page = self._page(handler, query, listed, cursor="after_id")
            return None if page is None else self._reply(handler, 200, {"data": page[0], "has_more": page[1]})
        if method == "POST" and len(segments) == 3 and segments[0] == "invoices" and segments[2] == "expire!":
            with self._lock:
                found = self.invoices.get(segments[1])
                if found and found["status"] == "PENDING":
                    found.update(status="EXPIRED", updated=_now())
            if not found:
                return self._reply(handler, 404, _error("INVOICE_NOT_FOUND_ERROR", "Invoice not found"))
            if found["status"] != "EXPIRED":
                return self._reply(handler, 404, _error("INVOICE_NOT_FOUND_ERROR",
                                                        f"Could not find a PENDING invoice {segments[1]}"))
            return self._reply(handler, 200, dict(found))
        if method == "GET" and segments[:2] == ["v2", "invoices"] and len(segments) == 3:
            found = self.invoices.get(segments[2])
            return self._reply(handler, 200, found) if found else self._reply(
                handler, 404, _error("INVOICE_NOT_FOUND_ERROR", "Invoice not found"))
        if method == "POST" and segments[:2] == ["v2", "payouts"] and len(segments) == 4 and segments[3] == "cancel":
            return self._payout_cancel(handler, segments[2])
        if method == "GET" and segments[:2] == ["v2", "payouts"] and len(segments) == 3:
            found = self.payouts.get(segments[2])
            return self._reply(handler, 200, found) if found else self._reply(
                handler, 404, _error("DATA_NOT_FOUND", "Payout not found"))
        if method == "GET" and parts.path == "/v2/payouts":
            reference = query.get("reference_id", [""])[0]
            if not reference:
                return self._reply(handler, 400, _error("API_VALIDATION_ERROR", "reference_id is required"))
            with self._lock:
                listed = [dict(p) for p in reversed(self.payouts.values())
                          if self.ignore_filters or p["reference_id"] == reference]
            page = self._page(handler, query, listed, cursor="after_id")
            if page is None:
                return None
            objects, more = page
            answer = {"data": objects, "has_more": more}
            if more:
                answer["links"] = {"href": f"/v2/payouts?reference_id={reference}&limit={len(objects)}"
                                           f"&after_id={objects[-1]['id']}", "rel": "next", "method": "GET"}
            return self._reply(handler, 200, answer)
        if method == "GET" and parts.path == "/v2/invoices":
            external_id = "" if self.ignore_filters else query.get("external_id", [""])[0]
            with self._lock:
                listed = [dict(i) for i in reversed(self.invoices.values())
                          if not external_id or i["external_id"] == external_id]
            page = self._page(handler, query, listed, cursor="last_invoice_id")
            return None if page is None else self._reply(handler, 200, page[0])
        if method == "GET" and parts.path == "/payouts_channels":
            return self._reply(handler, 200, self._payout_channels(query))
        return self._reply(handler, 404, _error("NOT_FOUND", f"{method} {parts.path} is not an endpoint"))

    def _page(self, handler, query: dict, listed: list[dict], *, cursor: str) -> tuple[list[dict], bool] | None:
        """One page of a list: `limit` (1 to 100, default 10; at most page_limit) objects after the one `cursor`
        names, and whether more follow; None when the request was answered with an error."""
        after = query.get(cursor, [""])[0]
        try:  # a number: the SDK's RefundApi writes its float limit as "2.0"
            limit = float(query.get("limit", ["10"])[0])
            limit = int(limit) if limit.is_integer() else 0
        except ValueError:
            limit = 0
        if not 1 <= limit <= 100:
            self._reply(handler, 400, _error("API_VALIDATION_ERROR", "limit must be between 1 and 100"))
            return None
        if after:
            with self._lock:
                fault = self._faults["pages"].pop(0) if self._faults["pages"] else None
            if fault == "5xx":
                refunds = urlsplit(handler.path).path.startswith("/refunds")
                self._reply(handler, 503, _error("CHANNEL_UNAVAILABLE" if refunds else "SERVER_ERROR",
                                                 "temporarily unavailable"))
                return None
            if fault == "429":
                self._reply(handler, 429, _error("RATE_LIMIT_EXCEEDED", "too many requests"))
                return None
            ids = [obj["id"] for obj in listed]
            if self.ignore_cursor:
                after, ids = "", []  # the cursor is not one this upstream knows: the first page again
            elif after not in ids:
                self._reply(handler, 400, _error("API_VALIDATION_ERROR", f"{cursor}: no such object {after}"))
                return None
            if after:
                listed = listed[ids.index(after) + 1:]
        size = min(limit, self.page_limit)
        return listed[:size], len(listed) > size

    def _authorized(self, handler) -> bool:
        header = handler.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return False
        user, _, _ = base64.b64decode(header[6:]).decode().partition(":")
        return secrets.compare_digest(user, self.secret_key)

    def _create(self, handler, endpoint: str, create) -> None:
        with self._lock:
            fault = self._faults[endpoint].pop(0) if self._faults[endpoint] else None
        if fault == "5xx":  # the Refund API's 503 is its channel's (CreateRefund503Response)
            code = "CHANNEL_UNAVAILABLE" if endpoint == "refunds" else "SERVER_ERROR"
            return self._reply(handler, 503, _error(code, "temporarily unavailable"))
        if fault == "429":
            return self._reply(handler, 429, _error("RATE_LIMIT_EXCEEDED", "too many requests"))
        if fault == "400":
            return self._reply(handler, 400, _error(*_REJECTIONS.get(endpoint, _REJECTION)))
        if endpoint == "refunds" and self.refund_create_delay:
            time.sleep(self.refund_create_delay)  # a slow upstream: the request is on the way, nothing exists yet
        with self._lock:
            status, obj = create()
        if endpoint == "invoices" and status == 200 and self.on_invoice_created:
            self.on_invoice_created(obj)
        if fault == "timeout":
            time.sleep(self.stall_seconds)  # the object exists; the client gave up waiting for this answer
        self._reply(handler, status, obj)

    def _invoice_create(self, body: dict) -> tuple[int, dict]:
        if not body.get("external_id") or not isinstance(body.get("amount"), (int, Decimal)) or body["amount"] <= 0:
            return 400, _error("API_VALIDATION_ERROR", "external_id and amount are required")
        invoice_id = secrets.token_hex(12)
        duration = int(body.get("invoice_duration") or 86400)
        currency = body.get("currency", "IDR")
        invoice = {"id": invoice_id, "external_id": body["external_id"], "user_id": "emulator-business",
                   "status": "PENDING", "merchant_name": "Emulator",
                   "merchant_profile_picture_url": f"{self.url}/web/merchant.png",
                   "amount": body["amount"], "currency": currency, "description": body.get("description", ""),
                   "invoice_url": f"{self.url}/web/invoices/{invoice_id}",
                   "expiry_date": (datetime.now(UTC) + timedelta(seconds=duration)).isoformat().replace("+00:00", "Z"),
                   "available_banks": [], "available_retail_outlets": [], "available_ewallets": [],
                   "available_qr_codes": [], "available_direct_debits": [], "available_paylaters": [],
                   **(_PHP_INVOICE_METHODS if currency == "PHP" else {}),
                   "should_exclude_credit_card": False, "should_send_email": False,
                   "created": _now(), "updated": _now()}
        for redirect in ("success_redirect_url", "failure_redirect_url"):
            if body.get(redirect):
                invoice[redirect] = body[redirect]
        self.invoices[invoice_id] = invoice
        return 200, dict(invoice)

    def _payout_create(self, body: dict, headers) -> tuple[int, dict]:
        key = headers.get("Idempotency-key", "")
        if not key:
            return 400, _error("API_VALIDATION_ERROR", "Idempotency-key header is required")
        if key in self.idempotency_keys:
            # As documented: the same key with the same body answers the first attempt's payout; with another body
            # DUPLICATE_ERROR. reused_key="409" plays an upstream that refuses every reuse.
            if self.reused_key == "replay" and self._idempotency_bodies[key] == body:
                return 200, dict(self.payouts[self.idempotency_keys[key]])
            return 409, _error("DUPLICATE_ERROR", "A payout with this idempotency key already exists. If you meant "
                                                  "to execute a different request, use another idempotency key.")
        properties = body.get("channel_properties") or {}
        if (not body.get("reference_id") or not properties.get("account_number")
                or not properties.get("account_holder_name")
                or not isinstance(body.get("amount"), (int, Decimal)) or body["amount"] <= 0):
            return 400, _error("API_VALIDATION_ERROR", "invalid payout")
        if not any(c["channel_code"] == body.get("channel_code") and c["currency"] == body.get("currency")
                   for c in self.payout_channels):
            return 400, _error("API_VALIDATION_ERROR",
                               f"channel_code {body.get('channel_code')!r} is not supported for {body.get('currency')}")
        payout_id = "disb-" + secrets.token_hex(12)
        created = datetime.now(UTC)
        payout = {"id": payout_id, "business_id": "emulator-business", "reference_id": body["reference_id"],
                  "amount": body["amount"], "currency": body.get("currency"), "channel_code": body["channel_code"],
                  "channel_properties": properties, "description": body.get("description", ""),
                  "status": "ACCEPTED", "created": _now(), "updated": _now(),
                  "estimated_arrival_time": (created + timedelta(minutes=15)).isoformat(
                      timespec="milliseconds").replace("+00:00", "Z")}
        self.payouts[payout_id] = payout
        self.idempotency_keys[key] = payout_id
        self._idempotency_bodies[key] = body
        return 200, dict(payout)

    def _refund_create(self, body: dict, headers) -> tuple[int, dict]:
        key = headers.get("Idempotency-key", "")
        if key and key in self.refund_keys:
            if self._refund_bodies[key] == body:
                return 200, dict(self.refunds[self.refund_keys[key]])
            return 409, _error("IDEMPOTENCY_ERROR", "A refund with this idempotency key already exists with another "
                                                    "request body.")
        amount = body.get("amount")
        if (not body.get("invoice_id") or body.get("reason") not in REFUND_REASONS
                or not isinstance(amount, (int, Decimal)) or amount <= 0):
            return 400, _error("API_VALIDATION_ERROR", "invoice_id, a positive amount and a documented reason are "
                                                       "required")
        invoice = self.invoices.get(body["invoice_id"])
        if invoice is None:
            return 404, _error("DATA_NOT_FOUND", "Invoice not found")
        reference = body.get("reference_id") or ""
        if reference and any(r["reference_id"] == reference for r in self.refunds.values()):
            return 409, _error("DUPLICATE_ERROR", f"A refund with reference_id {reference} already exists.")
        if invoice["status"] not in ("PAID", "SETTLED"):
            return 400, _error("INELIGIBLE_TRANSACTION", f"the invoice is {invoice['status']}")
        if invoice.get("payment_channel") in UNREFUNDABLE_CHANNELS:
            return 400, _error("REFUND_NOT_SUPPORTED", f"{invoice['payment_channel']} payments cannot be refunded")
        if body.get("currency", invoice["currency"]) != invoice["currency"]:
            return 400, _error("API_VALIDATION_ERROR", "currency differs from the invoice's")
        taken = sum(Decimal(str(r["amount"])) for r in self.refunds.values()
                    if r["invoice_id"] == invoice["id"] and r["status"] in ("PENDING", "SUCCEEDED"))
        if taken + amount > Decimal(str(invoice["amount"])):
            return 400, _error("MAXIMUM_REFUND_AMOUNT_REACHED", "the amount exceeds what is left unrefunded")
        refund_id = f"rfd-{uuid.uuid4()}"
        refund = {"id": refund_id, "payment_request_id": None, "invoice_id": invoice["id"],
                  "payment_id": invoice.get("payment_id", ""), "payment_method_type": invoice.get("payment_method", ""),
                  "amount": amount, "channel_code": invoice.get("payment_channel", ""), "country": "PH",
                  "currency": invoice["currency"], "reference_id": reference, "reason": body["reason"],
                  "status": "PENDING", "failure_code": None, "refund_fee_amount": None,
                  "created": _now(), "updated": _now(), "metadata": body.get("metadata")}
        self.refunds[refund_id] = refund
        if key:
            self.refund_keys[key] = refund_id
            self._refund_bodies[key] = body
        return 200, dict(refund)

    def _payout_cancel(self, handler, payout_id: str) -> None:
        with self._lock:
            payout = self.payouts.get(payout_id)
            if payout is not None and payout["status"] == "ACCEPTED":
                payout.update(status="CANCELLED", updated=_now())
        if payout is None:
            return self._reply(handler, 404, _error("DATA_NOT_FOUND", "Payout not found"))
        if payout["status"] != "CANCELLED":
            return self._reply(handler, 400, _error("CANCELLATION_NOT_ALLOWED_ERROR",
                                                    f"a {payout['status']} payout can no longer be cancelled"))
        return self._reply(handler, 200, dict(payout))

    def _payout_channels(self, query: dict) -> list[dict]:
        currency = query.get("currency", [""])[0]
        code = query.get("channel_code", [""])[0]
        categories = {c for value in query.get("channel_category", []) for c in value.split(",") if c}
        return [dict(c) for c in self.payout_channels
                if (not currency or c["currency"] == currency) and (not code or c["channel_code"] == code)
                and (not categories or c["channel_category"] in categories)]

    def _html(self, handler, invoice_id: str) -> None:
        invoice = self.invoices.get(invoice_id)
        text = (f"<!DOCTYPE html><meta name='viewport' content='width=device-width'>"
                f"<title>Xendit invoice</title><h1>Xendit checkout (emulator)</h1>"
                f"<p id='external-id'>{invoice['external_id']}</p><p id='amount'>{invoice['amount']}</p>"
                if invoice else "<!DOCTYPE html><title>Not found</title>")
        payload = text.encode()
        handler.send_response(200 if invoice else 404)
        handler.send_header("Content-Type", "text/html; charset=utf-8")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _reply(self, handler, status: int, obj) -> None:
        payload = _encode(obj)
        with self._lock:
            self.answers.append((handler.command, urlsplit(handler.path).path, status, json.loads(payload)))
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except OSError:
            pass  # the client gave up (timeout) before the stalled answer
