"""A real HTTP emulator of the documented PayMongo endpoints on 127.0.0.1 (no traffic leaves the machine).

  POST /v1/checkout_sessions             {"data": {"attributes": {line_items, payment_method_types, reference_number,
                                         ...}}} → the session {"data": {"id": "cs_...", "type": "checkout_session",
                                         "attributes": {checkout_url, status "active", payments [], ...}}}
  GET  /v1/checkout_sessions/{id}        with its payments[] once paid (each {"id": "pay_...", "type": "payment",
                                         "attributes": {amount, currency, status "paid", paid_at}})
  POST /v1/checkout_sessions/{id}/expire refused (400) when already expired or paid, as documented
  GET  /checkout/{id}                    the hosted checkout page the payer lands on
  GET  /v2/wallets                       our one PHP wallet, with its source_account {number, name, bic}
  GET  /v2/transfers/receiving_institutions?provider=instapay|pesonet
  POST /v2/batch_transfers               {"data": {"attributes": {"transfers": [...]}}} → {"data": {"id":
                                         "batch_tr_...", "transfers": [<transfer>]}} (PayMongo's Transfer Resource)
  GET  /v1/payments/{id}, GET /v1/payments   a session's payments (PayMongo's Payment Resource: source {id, type},
                                         refunds [...], fee, net_amount, billing ...)
  POST /v1/refunds                       {"data": {"attributes": {amount, payment_id, reason, notes?, metadata?}}} →
                                         the refund, status "pending" (PayMongo's Refund Resource); an amount over
                                         what is left of the payment → 400 parameter_above_maximum, nothing created
  GET  /v1/refunds/{id}, GET /v1/refunds?payment_id=&limit=&after=   (the list newest first, paged like transfers)
  GET  /v2/transfers/{id}, GET /v2/transfers?reference_number=&limit=&after=   (JSON:API: {"data": {"id", "type":
                                         "transfer", "attributes": {...}}}; the list, newest first, {"data": [...],
                                         "has_more": ...}: `limit` objects (default 10, at most `page_limit`) after
                                         the `after` cursor)

HTTP Basic auth with the secret key as user name, errors {"errors": [{"code", "detail"}]}. Idempotency-Key on the
creates: a reused key with the same body replays the first answer (`reused_key="replay"`, the default) or is
ignored (`reused_key="ignore"`: another object is created, the case where the adapter's own lookup by reference must
hold).

Lists as a real upstream may answer them: `page_limit` caps a page below the `limit` asked for, and
`ignore_filters=True` answers every transfer whatever `reference_number` asks (the adapter must page and match our
reference itself), `omit_has_more=True` answers lists without `has_more`, `refuse_reference_filter=True` refuses
`reference_number` as a filter (400 parameter_invalid), `ignore_cursor=True` answers the first page whatever
`after` names; `transfers_of_others(n)` adds n transfers of other references,
newer than ours.

Faults, for the adapter's tests and the routing helper's failover tests:
  fail_next("checkout_sessions" | "batch_transfers" | "refunds", mode, ...) scripts the next creates: "timeout"
      processes the request, then stalls past the client's timeout (the answer is lost, the object exists); "5xx"
      answers 503 and creates nothing; "429" answers rate limited, nothing created; "400" refuses (parameter_invalid),
      nothing created.
  fail_next_page("5xx" | "429", ...) scripts the next list requests that ask for a page after the first.
  outage(True) answers every request 503 until outage(False); latency(seconds) delays every answer.
The test plays PayMongo's side: `pay_session`, `expire_session`, `settle_transfer`, `settle_refund` (succeeded or
failed), and `webhook(...)` POSTs a documented event signed with Paymongo-Signature (t, te, li) to our endpoint;
every webhook it signs itself is kept in `webhooks_sent` (body, header) for the Node SDK's check.
"""

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import requests

# The receiving institutions the emulator lists (name, BIC); GCash and Maya take InstaPay only.
INSTITUTIONS = {
    "instapay": [("BDO Unibank, Inc.", "BNORPHMMXXX"), ("Bank of the Philippine Islands", "BOPIPHMMXXX"),
                 ("Metropolitan Bank and Trust Company", "MBTCPHMMXXX"), ("Land Bank of the Philippines", "TLBPPHMMXXX"),
                 ("Philippine National Bank", "PNBMPHMMXXX"), ("Security Bank Corporation", "SETCPHMMXXX"),
                 ("Union Bank of the Philippines", "UBPHPHMMXXX"), ("Rizal Commercial Banking Corporation",
                                                                     "RCBCPHMMXXX"),
                 ("China Banking Corporation", "CHBKPHMMXXX"), ("G-Xchange, Inc. (GCash)", "GXCHPHM2XXX"),
                 ("Maya Philippines, Inc.", "PAPHPHM1XXX"), ("PayMongo Payments, Inc.", "PAEYPHM2XXX")],
    "pesonet": [("BDO Unibank, Inc.", "BNORPHMMXXX"), ("Bank of the Philippine Islands", "BOPIPHMMXXX"),
                ("Metropolitan Bank and Trust Company", "MBTCPHMMXXX"), ("Land Bank of the Philippines", "TLBPPHMMXXX"),
                ("Philippine National Bank", "PNBMPHMMXXX"), ("Security Bank Corporation", "SETCPHMMXXX"),
                ("Union Bank of the Philippines", "UBPHPHMMXXX"), ("Rizal Commercial Banking Corporation",
                                                                    "RCBCPHMMXXX"),
                ("China Banking Corporation", "CHBKPHMMXXX")],
}
WALLET_ACCOUNT = {"number": "100200300400", "name": "Payments Platform Inc.", "bic": "PAEYPHM2XXX"}
INSTAPAY_LIMIT = 5_000_000


def _encode(obj) -> bytes:
    return json.dumps(obj, default=lambda value: int(value) if isinstance(value, Decimal) else str(value)).encode()


def signature_header(*, body: bytes, secret: str, timestamp: int, livemode: bool) -> str:
    """Paymongo-Signature as documented: t=<timestamp>,te=<test sig>,li=<live sig>; HMAC-SHA256 of "<t>.<body>"."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},te={'' if livemode else digest},li={digest if livemode else ''}"


class PayMongoEmulator:
    def __init__(self, *, secret_key: str = "sk_test_emulator", webhook_secret: str = "whsk_emulator",
                 stall_seconds: float = 3.0, reused_key: str = "replay", page_limit: int = 100,
                 ignore_filters: bool = False):
        self.secret_key = secret_key
        self.webhook_secret = webhook_secret
        self.stall_seconds = stall_seconds
        self.reused_key = reused_key
        self.page_limit = page_limit
        self.ignore_filters = ignore_filters
        self.ignore_cursor = False
        self.omit_has_more = False
        self.refuse_reference_filter = False
        self.livemode = secret_key.startswith("sk_live_")
        self.sessions: dict[str, dict] = {}
        self.transfers: dict[str, dict] = {}
        self.payments: dict[str, dict] = {}
        self.refunds: dict[str, dict] = {}
        self.webhooks_sent: list[tuple[bytes, str]] = []
        self.idempotency: dict[tuple[str, str], tuple[bytes, int, dict]] = {}  # (path, key) → (body, status, answer)
        self.requests: list[tuple[str, str, dict, bytes]] = []
        self.wallets = [{"id": "wallet_" + secrets.token_hex(12), "type": "wallet",
                         "attributes": {"currency": "PHP", "status": "activated", "available_balance": 10**12,
                                        "source_account": dict(WALLET_ACCOUNT), "livemode": self.livemode}}]
        self.institutions = {provider: list(rows) for provider, rows in INSTITUTIONS.items()}
        self._faults: dict[str, list[str]] = {"checkout_sessions": [], "batch_transfers": [], "refunds": [],
                                              "pages": []}
        self._outage = False
        self._latency = 0.0
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

    # --- lifecycle and faults -----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> "PayMongoEmulator":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def fail_next(self, endpoint: str, *modes: str) -> None:
        """Script the next creates of `endpoint` ('checkout_sessions', 'batch_transfers' or 'refunds'): 'timeout',
        '5xx', '429' or '400' each."""
        with self._lock:
            self._faults[endpoint].extend(modes)

    def fail_next_page(self, *modes: str) -> None:
        """Script the next list requests for a page after the first (they carry a cursor): '5xx' or '429' each."""
        with self._lock:
            self._faults["pages"].extend(modes)

    def outage(self, down: bool = True) -> None:
        """Every request answered 503 (nothing created, nothing read) until outage(False)."""
        self._outage = down

    def latency(self, seconds: float) -> None:
        """Every answer delayed this long (past the client's timeout: a slow upstream)."""
        self._latency = seconds

    # --- PayMongo's side of the story ---------------------------------------------------------------------------

    def sessions_by_reference(self, reference_number: str) -> list[dict]:
        return [s for s in self.sessions.values() if s["attributes"]["reference_number"] == reference_number]

    def transfers_by_reference(self, reference_number: str) -> list[dict]:
        return [t for t in self.transfers.values() if t["attributes"]["reference_number"] == reference_number]

    def transfers_of_others(self, count: int, *, amount: int = 150000) -> list[str]:
        """`count` transfers someone else on the account sent (other reference numbers), newer than every one before;
        their ids."""
        transfers = [{"source_account": dict(WALLET_ACCOUNT), "provider": "instapay", "amount": amount,
                      "currency": "PHP", "reference_number": f"OTHER-{secrets.token_hex(6)}",
                      "destination_account": {"number": "09170000000", "name": "Someone Else", "bic": "GXCHPHM2XXX"}}
                     for _ in range(count)]
        with self._lock:
            status, answer = self._batch_create({"data": {"attributes": {"transfers": transfers}}})
        assert status == 200, answer
        return [t["id"] for t in answer["data"]["transfers"]]

    def pay_session(self, session_id: str, *, method: str = "gcash", amount: int | None = None) -> dict:
        """The payer pays on the checkout page: a `paid` payment on the session (its payment intent succeeded)."""
        with self._lock:
            attributes = self.sessions[session_id]["attributes"]
            total = sum(item["amount"] * item["quantity"] for item in attributes["line_items"])
            now = int(time.time())
            paid = total if amount is None else amount
            fee = paid * 25 // 1000
            payment = {"id": "pay_" + secrets.token_hex(12), "type": "payment", "attributes": {
                "access_url": None, "amount": paid, "balance_transaction_id": "bal_txn_" + secrets.token_hex(12),
                "billing": None, "currency": "PHP", "description": attributes.get("description"), "disputed": False,
                "external_reference_number": None, "fee": fee, "foreign_fee": 0, "livemode": self.livemode,
                "net_amount": paid - fee, "origin": "api", "payment_intent_id": attributes["payment_intent"]["id"],
                "payout": None, "source": {"id": "src_" + secrets.token_hex(12), "type": method},
                "statement_descriptor": "Emulator", "status": "paid", "tax_amount": None, "metadata": None,
                "refunds": [], "taxes": [], "available_at": now + 86400, "created_at": now, "credited_at": None,
                "paid_at": now, "updated_at": now}}
            self.payments[payment["id"]] = payment  # the same object as in the session's payments[]
            attributes["payments"].append(payment)
            attributes["payment_intent"]["attributes"]["status"] = "succeeded"
            attributes["paid_at"] = now
            attributes["updated_at"] = now
            return json.loads(_encode(self.sessions[session_id]))

    def expire_session(self, session_id: str) -> dict:
        with self._lock:
            self.sessions[session_id]["attributes"].update(status="expired", updated_at=int(time.time()))
            return json.loads(_encode(self.sessions[session_id]))

    def settle_transfer(self, transfer_id: str, status: str, *, failure_code: str | None = None) -> dict:
        with self._lock:
            self.transfers[transfer_id]["attributes"].update(status=status, failure_code=failure_code,
                                                             updated_at=int(time.time()))
            return json.loads(_encode(self.transfers[transfer_id]))

    def refunds_of(self, payment_id: str) -> list[dict]:
        return [r for r in self.refunds.values() if r["attributes"]["payment_id"] == payment_id]

    def settle_refund(self, refund_id: str, status: str) -> dict:
        """PayMongo finishes the refund: 'succeeded' or 'failed' (a failed one gives its amount back to the
        payment's refundable)."""
        with self._lock:
            now = int(time.time())
            self.refunds[refund_id]["attributes"].update(status=status, updated_at=now,
                                                         refunded_at=now if status == "succeeded" else None)
            return json.loads(_encode(self.refunds[refund_id]))

    def refund_webhook(self, refund_id: str, url: str, **kwargs):
        """payment.refunded once the refund succeeded, payment.refund.updated for any other change (a failure
        included), as documented: the event's data is the Payment, with its refunds."""
        with self._lock:
            refund = self.refunds[refund_id]
            resource = json.loads(_encode(self.payments[refund["attributes"]["payment_id"]]))
        kind = "payment.refunded" if refund["attributes"]["status"] == "succeeded" else "payment.refund.updated"
        return self.webhook(url, kind, resource, **kwargs)

    def event(self, event_type: str, resource: dict, *, livemode: bool | None = None) -> bytes:
        """A documented event: {"data": {"id": "evt_...", "type": "event", "attributes": {type, livemode, data,
        previous_data, created_at, updated_at}}}."""
        now = int(time.time())
        return _encode({"data": {"id": "evt_" + secrets.token_hex(12), "type": "event", "attributes": {
            "type": event_type, "livemode": self.livemode if livemode is None else livemode, "data": resource,
            "previous_data": {}, "created_at": now, "updated_at": now}}})

    def webhook(self, url: str, event_type: str, resource: dict, *, livemode: bool | None = None,
                timestamp: int | None = None, secret: str | None = None, signature: str | None = None,
                body: bytes | None = None):
        """POST the event to `url`, signed as PayMongo signs it (or with the given signature / secret / time)."""
        payload = body if body is not None else self.event(event_type, resource, livemode=livemode)
        header = signature if signature is not None else signature_header(
            body=payload, secret=self.webhook_secret if secret is None else secret,
            timestamp=int(time.time()) if timestamp is None else timestamp,
            livemode=self.livemode if livemode is None else livemode)
        if signature is None and secret is None:  # signed as PayMongo signs: the SDK's constructEvent must take it
            with self._lock:
                self.webhooks_sent.append((payload, header))
        return requests.post(url, data=payload, timeout=30,
                             headers={"Content-Type": "application/json", "Paymongo-Signature": header})

    def session_webhook(self, session_id: str, url: str, **kwargs):
        """checkout_session.payment.paid: the session itself as the event's data."""
        with self._lock:
            resource = json.loads(_encode(self.sessions[session_id]))
        return self.webhook(url, "checkout_session.payment.paid", resource, **kwargs)

    def transfer_webhook(self, transfer_id: str, url: str, **kwargs):
        with self._lock:
            resource = json.loads(_encode(self.transfers[transfer_id]))
        status = resource["attributes"]["status"]
        return self.webhook(url, f"transfer.{status}", resource, **kwargs)

    # --- HTTP ---------------------------------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        parts = urlsplit(handler.path)
        with self._lock:
            self.requests.append((method, handler.path, dict(handler.headers), raw))
        if self._latency:
            time.sleep(self._latency)
        if self._outage:
            return self._error(handler, 503, "service_unavailable", "PayMongo is temporarily unavailable")
        if parts.path.startswith("/checkout/"):
            return self._html(handler, parts.path.rsplit("/", 1)[-1])
        if not self._authorized(handler):
            return self._error(handler, 401, "authentication_failed", "The API key is invalid.")
        try:
            body = json.loads(raw, parse_float=Decimal) if raw else {}
        except ValueError:
            return self._error(handler, 400, "parameter_invalid", "The request body is not valid JSON.")
        segments = [s for s in parts.path.split("/") if s]
        query = parse_qs(parts.query)
        if method == "POST" and parts.path == "/v1/checkout_sessions":
            return self._create(handler, "checkout_sessions", parts.path, raw, lambda: self._session_create(body))
        if method == "POST" and parts.path == "/v2/batch_transfers":
            return self._create(handler, "batch_transfers", parts.path, raw, lambda: self._batch_create(body))
        if method == "POST" and parts.path == "/v1/refunds":
            return self._create(handler, "refunds", parts.path, raw, lambda: self._refund_create(body))
        if method == "GET" and segments[:2] in (["v1", "payments"], ["v1", "refunds"]):
            store = self.payments if segments[1] == "payments" else self.refunds
            with self._lock:
                if len(segments) == 3:
                    found = store.get(segments[2])
                    if found is None:
                        return self._error(handler, 404, "resource_not_found",
                                           f"No such {segments[1][:-1]} with id {segments[2]}")
                    return self._reply(handler, 200, {"data": found})
                payment_id = "" if self.ignore_filters else query.get("payment_id", [""])[0]
                listed = [obj for obj in reversed(store.values())
                          if segments[1] == "payments" or not payment_id
                          or obj["attributes"]["payment_id"] == payment_id]
                return self._list_page(handler, query, listed)
        if segments[:2] == ["v1", "checkout_sessions"] and len(segments) >= 3:
            with self._lock:
                found = self.sessions.get(segments[2])
                if found is None:
                    return self._error(handler, 404, "resource_not_found", f"No such checkout_session {segments[2]}")
                if method == "POST" and segments[3:] == ["expire"]:
                    attributes = found["attributes"]
                    if attributes["status"] == "expired" or attributes["payments"]:
                        return self._error(handler, 400, "resource_failed_state",
                                           "The checkout session is already expired or has a payment.")
                    attributes.update(status="expired", updated_at=int(time.time()))
                if method == "GET" or segments[3:] == ["expire"]:
                    return self._reply(handler, 200, {"data": found})
        if method == "GET" and parts.path == "/v2/wallets":
            return self._reply(handler, 200, {"data": self.wallets, "has_more": False})
        if method == "GET" and parts.path == "/v2/transfers/receiving_institutions":
            provider = query.get("provider", [""])[0]
            if provider not in self.institutions:
                return self._error(handler, 400, "parameter_invalid", "provider must be instapay or pesonet")
            return self._reply(handler, 200, {"data": [
                {"id": bic, "type": "receiving_institution", "attributes": {"name": name, "bic": bic,
                                                                            "provider": provider}}
                for name, bic in self.institutions[provider]]})
        if method == "GET" and parts.path == "/v2/transfers":
            if self.refuse_reference_filter and "reference_number" in query:
                return self._error(handler, 400, "parameter_invalid", "reference_number is not a valid filter")
            reference = "" if self.ignore_filters else query.get("reference_number", [""])[0]
            with self._lock:
                listed = [t for t in reversed(self.transfers.values())
                          if not reference or t["attributes"]["reference_number"] == reference]
                return self._list_page(handler, query, listed)
        if method == "GET" and segments[:2] == ["v2", "transfers"] and len(segments) == 3:
            with self._lock:
                found = self.transfers.get(segments[2])
                if found is None:
                    return self._error(handler, 404, "resource_not_found", f"No such transfer {segments[2]}")
                return self._reply(handler, 200, {"data": found})
        return self._error(handler, 404, "resource_not_found", parts.path)

    def _list_page(self, handler, query: dict, listed: list[dict]) -> None:
        """One page of a list, PayMongo's way: `limit` (1 to 100, default 10; at most page_limit) objects after the
        object the `after` cursor names, and whether more follow."""
        after = query.get("after", [""])[0]
        try:
            limit = int(query.get("limit", ["10"])[0])
        except ValueError:
            limit = 0
        if not 1 <= limit <= 100:
            return self._error(handler, 400, "parameter_invalid", "limit must be between 1 and 100")
        if after:
            fault = self._faults["pages"].pop(0) if self._faults["pages"] else None
            if fault == "5xx":
                return self._error(handler, 503, "service_unavailable", "temporarily unavailable")
            if fault == "429":
                return self._error(handler, 429, "rate_limit_exceeded", "too many requests")
            ids = [obj["id"] for obj in listed]
            if self.ignore_cursor:
                after, ids = "", []  # the cursor is not one this upstream knows: the first page again
            elif after not in ids:
                return self._error(handler, 400, "parameter_invalid", f"after: no such resource {after}")
            if after:
                listed = listed[ids.index(after) + 1:]
        size = min(limit, self.page_limit)
        page = {"data": listed[:size]} if self.omit_has_more else {"data": listed[:size], "has_more": len(listed) > size}
        return self._reply(handler, 200, page)

    def _authorized(self, handler) -> bool:
        header = handler.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return False
        user, _, _ = base64.b64decode(header[6:]).decode().partition(":")
        return secrets.compare_digest(user, self.secret_key)

    def _create(self, handler, endpoint: str, path: str, raw: bytes, create) -> None:
        with self._lock:
            fault = self._faults[endpoint].pop(0) if self._faults[endpoint] else None
        if fault == "5xx":
            return self._error(handler, 503, "service_unavailable", "temporarily unavailable")
        if fault == "429":
            return self._error(handler, 429, "rate_limit_exceeded", "too many requests")
        if fault == "400":
            return self._error(handler, 400, "parameter_invalid", "destination_account.number is invalid")
        key = handler.headers.get("Idempotency-Key", "")
        with self._lock:
            if key and self.reused_key == "replay" and (path, key) in self.idempotency:
                first_body, status, answer = self.idempotency[(path, key)]
                if first_body != raw:
                    status, answer = 400, {"errors": [{"code": "idempotency_key_in_use",
                                                       "detail": "the key was used with another request"}]}
            else:
                status, answer = create()
                if key and status < 500:
                    self.idempotency[(path, key)] = (raw, status, answer)
        if fault == "timeout":
            time.sleep(self.stall_seconds)  # the object exists; the client gave up waiting for this answer
        self._reply(handler, status, answer)

    @staticmethod
    def _invalid(detail: str) -> tuple[int, dict]:
        return 400, {"errors": [{"code": "parameter_invalid", "detail": detail}]}

    def _session_create(self, body: dict) -> tuple[int, dict]:
        attributes = (body.get("data") or {}).get("attributes") if isinstance(body, dict) else None
        if not isinstance(attributes, dict):
            return self._invalid("data.attributes is required")
        items = attributes.get("line_items") or []
        if not items or any(not isinstance(i.get("amount"), int) or i["amount"] < 100 or i.get("currency") != "PHP"
                            or not isinstance(i.get("quantity"), int) or not i.get("name") for i in items):
            return self._invalid("line_items: name, an integer amount of at least 100 centavos, PHP, quantity")
        methods = attributes.get("payment_method_types") or []
        if not methods or set(methods) - {"gcash", "paymaya", "grab_pay", "qrph", "card", "dob", "billease"}:
            return self._invalid("payment_method_types is invalid")
        session_id = "cs_" + secrets.token_hex(12)
        now = int(time.time())
        session = {"id": session_id, "type": "checkout_session", "attributes": {
            "billing": None, "cancel_url": attributes.get("cancel_url"), "success_url": attributes.get("success_url"),
            "checkout_url": f"{self.url}/checkout/{session_id}", "client_key": f"{session_id}_client",
            "description": attributes.get("description"), "line_items": items, "livemode": self.livemode,
            "merchant": "Emulator", "metadata": attributes.get("metadata"), "paid_at": None,
            "payment_intent": {"id": "pi_" + secrets.token_hex(12), "type": "payment_intent",
                               "attributes": {"amount": sum(i["amount"] * i["quantity"] for i in items),
                                              "currency": "PHP", "status": "awaiting_payment_method"}},
            "payment_method_types": methods, "payments": [], "reference_number": attributes.get("reference_number"),
            "send_email_receipt": bool(attributes.get("send_email_receipt")),
            "show_description": bool(attributes.get("show_description", True)),
            "show_line_items": bool(attributes.get("show_line_items", True)), "status": "active",
            "created_at": now, "updated_at": now}}
        self.sessions[session_id] = session
        return 200, {"data": json.loads(_encode(session))}

    def _refund_create(self, body: dict) -> tuple[int, dict]:
        """A refund as PayMongo validates it: an existing paid payment, an integer amount of at least 100 centavos and
        at most what its refunds not failed leave, one of the documented reasons, notes within 255 characters,
        metadata of string values."""
        attributes = (body.get("data") or {}).get("attributes") if isinstance(body, dict) else None
        if not isinstance(attributes, dict):
            return self._invalid("data.attributes is required")
        payment = self.payments.get(str(attributes.get("payment_id") or ""))
        if payment is None:
            return 404, {"errors": [{"code": "resource_not_found", "detail": f"No such payment with id "
                                     f"{attributes.get('payment_id')}.", "source": {"pointer": "payment_id",
                                                                                    "attribute": "payment_id"}}]}
        amount = attributes.get("amount")
        if not isinstance(amount, int) or isinstance(amount, bool) or amount < 100:
            return self._invalid("amount must be an integer of at least 100.")
        if attributes.get("reason") not in ("duplicate", "fraudulent", "requested_by_customer", "others"):
            return self._invalid("reason must be one of duplicate, fraudulent, requested_by_customer and others.")
        notes = attributes.get("notes")
        if notes is not None and (not isinstance(notes, str) or len(notes) > 255):
            return self._invalid("notes must be at most 255 characters.")
        metadata = attributes.get("metadata")
        if metadata is not None and (not isinstance(metadata, dict)
                                     or not all(isinstance(v, str) for v in metadata.values())):
            return self._invalid("metadata accepts string values only.")
        fields = payment["attributes"]
        if fields["status"] != "paid":
            return 400, {"errors": [{"code": "resource_failed_state", "detail": "Only a paid payment can be "
                                     "refunded."}]}
        refunded = sum(r["attributes"]["amount"] for r in fields["refunds"] if r["attributes"]["status"] != "failed")
        if amount > fields["amount"] - refunded:
            return 400, {"errors": [{"code": "parameter_above_maximum",
                                     "detail": f"The amount cannot be more than the remaining refundable amount of "
                                               f"{fields['amount'] - refunded}.",
                                     "source": {"pointer": "amount", "attribute": "amount"}}]}
        now = int(time.time())
        refund = {"id": "ref_" + secrets.token_hex(12), "type": "refund", "attributes": {
            "amount": amount, "balance_transaction_id": "bal_txn_" + secrets.token_hex(12), "currency": "PHP",
            "livemode": self.livemode, "metadata": metadata, "notes": notes, "payment_id": payment["id"],
            "payout_id": None, "reason": attributes["reason"], "status": "pending", "available_at": now,
            "created_at": now, "refunded_at": None, "updated_at": now}}
        self.refunds[refund["id"]] = refund
        fields["refunds"].append(refund)  # the same object: the payment shows its refunds as they change
        fields["updated_at"] = now
        return 200, {"data": json.loads(_encode(refund))}

    def _batch_create(self, body: dict) -> tuple[int, dict]:
        attributes = (body.get("data") or {}).get("attributes") if isinstance(body, dict) else None
        transfers = attributes.get("transfers") if isinstance(attributes, dict) else None
        if not isinstance(transfers, list) or not transfers:
            return self._invalid("data.attributes.transfers is required")
        batch_id = "batch_tr_" + secrets.token_hex(12)
        created = []
        for transfer in transfers:
            provider = transfer.get("provider")
            destination = transfer.get("destination_account") or {}
            amount = transfer.get("amount")
            if transfer.get("source_account") != WALLET_ACCOUNT:
                return self._invalid("source_account must be one of the wallet's accounts")
            if provider not in self.institutions:
                return self._invalid("provider must be instapay or pesonet")
            if destination.get("bic") not in {bic for _, bic in self.institutions[provider]}:
                return self._invalid(f"destination_account.bic is not a {provider} receiving institution")
            if not destination.get("number") or not destination.get("name"):
                return self._invalid("destination_account number and name are required")
            if not isinstance(amount, int) or amount <= 0 or transfer.get("currency") != "PHP":
                return self._invalid("amount must be a positive integer in centavos, currency PHP")
            if provider == "instapay" and amount > INSTAPAY_LIMIT:
                return self._invalid("amount is above InstaPay's limit of PHP 50,000")
            if not transfer.get("reference_number"):
                return self._invalid("reference_number is required")
            now = int(time.time())
            transfer_id = "tr_" + secrets.token_hex(12)
            fields = {"livemode": self.livemode, "merchant_id": "org_emulator",
                      "source_account": transfer["source_account"], "destination_account": destination,
                      "amount": amount, "fee": 1000, "currency": "PHP", "provider": provider,
                      "provider_reference_number": None, "reference_number": transfer["reference_number"],
                      "purpose": transfer.get("purpose"), "description": transfer.get("description"),
                      "callback_url": transfer.get("callback_url", ""), "metadata": transfer.get("metadata"),
                      "status": "pending", "failure_code": None, "batch_transfer_id": batch_id,
                      "created_at": now, "updated_at": now}
            self.transfers[transfer_id] = {"id": transfer_id, "type": "transfer", "attributes": fields}
            created.append({"id": transfer_id, **fields})
        return 200, {"data": {"id": batch_id, "transfers": json.loads(_encode(created))}}

    def _html(self, handler, session_id: str) -> None:
        session = self.sessions.get(session_id)
        text = (f"<!DOCTYPE html><meta name='viewport' content='width=device-width'>"
                f"<title>PayMongo checkout</title><h1>PayMongo checkout (emulator)</h1>"
                f"<p id='reference-number'>{session['attributes']['reference_number']}</p>"
                f"<p id='amount'>{sum(i['amount'] * i['quantity'] for i in session['attributes']['line_items'])}</p>"
                f"<p id='methods'>{' '.join(session['attributes']['payment_method_types'])}</p>"
                if session else "<!DOCTYPE html><title>Not found</title>")
        payload = text.encode()
        handler.send_response(200 if session else 404)
        handler.send_header("Content-Type", "text/html; charset=utf-8")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _error(self, handler, status: int, code: str, detail: str) -> None:
        self._reply(handler, status, {"errors": [{"code": code, "detail": detail}]})

    @staticmethod
    def _reply(handler, status: int, obj) -> None:
        payload = _encode(obj)
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except OSError:
            pass  # the client gave up (timeout) before the stalled answer
