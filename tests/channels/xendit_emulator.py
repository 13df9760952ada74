"""A real HTTP emulator of the documented Xendit endpoints on 127.0.0.1 (no traffic leaves the machine).

  POST /v2/invoices, GET /v2/invoices/{id}, GET /v2/invoices?external_id=... (a JSON array, as documented),
  POST /invoices/{id}/expire! (documented: expires a PENDING invoice), GET /web/invoices/{id} (the hosted invoice
  page the payer lands on)
  POST /v2/payouts (Idempotency-key required; a reused key answers 409 DUPLICATE_ERROR by default: of the
  two answers an upstream may give a retried key, a replay of the first answer or a refusal, the harder one;
  `reused_key="replay"` answers as Xendit documents it for the same key and body: the first attempt's payout,
  and 409 only for a different body). The payout object does not show its idempotency key (as documented);
  the emulator's own record of it is `idempotency_keys`,
  GET /v2/payouts/{id}, GET /v2/payouts?reference_id=... ({"data": [...], "has_more": false}, as documented:
  xendit-python's GetPayouts200Response)

HTTP Basic auth with the secret key as user name. Scripted faults on the creates: `emulator.fail_next("payouts",
"timeout")` processes the request and then stalls past the client's timeout (the answer is lost, the object
exists), `"5xx"` answers 503 without creating anything, `"429"` answers Xendit's RATE_LIMIT_EXCEEDED without
creating anything, `"400"` refuses the payout (INVALID_DESTINATION) without creating anything.
The test plays Xendit's side: `pay_invoice`,
`settle_payout`, ... change the objects, and `invoice_webhook` / `payout_webhook` POST the documented webhook bodies
with an x-callback-token to our endpoint.
"""

import base64
import json
import secrets
import threading
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import requests


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _encode(obj) -> bytes:
    return json.dumps(obj, default=lambda value: float(value) if isinstance(value, Decimal) else str(value)).encode()


class XenditEmulator:
    def __init__(self, *, secret_key: str = "xnd_development_emulator", callback_token: str = "emulator-token",
                 stall_seconds: float = 3.0, reused_key: str = "409"):
        self.secret_key = secret_key
        self.callback_token = callback_token
        self.stall_seconds = stall_seconds
        self.invoices: dict[str, dict] = {}
        self.payouts: dict[str, dict] = {}
        self.idempotency_keys: dict[str, str] = {}  # key → the payout it created
        self._idempotency_bodies: dict[str, dict] = {}
        self.reused_key = reused_key
        self.requests: list[tuple[str, str, dict, bytes]] = []
        self._faults: dict[str, list[str]] = {"invoices": [], "payouts": []}
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
        """Script the next creates of `endpoint` ('invoices' or 'payouts'): 'timeout', '5xx', '429' or '400' each."""
        with self._lock:
            self._faults[endpoint].extend(modes)

    # --- Xendit's side of the story ---------------------------------------------------------------------------

    def pay_invoice(self, invoice_id: str) -> dict:
        with self._lock:
            invoice = self.invoices[invoice_id]
            invoice.update(status="PAID", paid_amount=invoice["amount"], paid_at=_now(), updated=_now(),
                           payment_method="EWALLET", payment_channel="GCASH")
            return dict(invoice)

    def expire_invoice(self, invoice_id: str) -> dict:
        with self._lock:
            self.invoices[invoice_id].update(status="EXPIRED", updated=_now())
            return dict(self.invoices[invoice_id])

    def settle_payout(self, payout_id: str, status: str, failure_code: str | None = None) -> dict:
        with self._lock:
            self.payouts[payout_id].update(status=status, failure_code=failure_code, updated=_now())
            return dict(self.payouts[payout_id])

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
            return self._reply(handler, 401, {"error_code": "INVALID_API_KEY", "message": "API key is invalid"})
        try:
            body = json.loads(raw, parse_float=Decimal) if raw else {}
        except ValueError:
            return self._reply(handler, 400, {"error_code": "API_VALIDATION_ERROR", "message": "invalid JSON"})
        segments = [s for s in parts.path.split("/") if s]
        if method == "POST" and parts.path == "/v2/invoices":
            return self._create(handler, "invoices", lambda: self._invoice_create(body))
        if method == "POST" and parts.path == "/v2/payouts":
            return self._create(handler, "payouts", lambda: self._payout_create(body, handler.headers))
        if method == "POST" and len(segments) == 3 and segments[0] == "invoices" and segments[2] == "expire!":
            with self._lock:
                found = self.invoices.get(segments[1])
                if found and found["status"] == "PENDING":
                    found.update(status="EXPIRED", updated=_now())
            if not found:
                return self._reply(handler, 404, {"error_code": "INVOICE_NOT_FOUND_ERROR", "message": "not found"})
            if found["status"] != "EXPIRED":
                return self._reply(handler, 400, {"error_code": "INVALID_INVOICE_STATUS", "message": "not pending"})
            return self._reply(handler, 200, dict(found))
        if method == "GET" and segments[:2] == ["v2", "invoices"] and len(segments) == 3:
            found = self.invoices.get(segments[2])
            return self._reply(handler, 200, found) if found else self._reply(
                handler, 404, {"error_code": "INVOICE_NOT_FOUND_ERROR", "message": "not found"})
        if method == "GET" and segments[:2] == ["v2", "payouts"] and len(segments) == 3:
            found = self.payouts.get(segments[2])
            return self._reply(handler, 200, found) if found else self._reply(
                handler, 404, {"error_code": "DATA_NOT_FOUND", "message": "not found"})
        if method == "GET" and parts.path == "/v2/payouts":
            reference = parse_qs(parts.query).get("reference_id", [""])[0]
            if not reference:
                return self._reply(handler, 400, {"error_code": "API_VALIDATION_ERROR",
                                                  "message": "reference_id is required"})
            return self._reply(handler, 200, {"data": self.payouts_by_reference(reference), "has_more": False})
        if method == "GET" and parts.path == "/v2/invoices":
            external_id = parse_qs(parts.query).get("external_id", [""])[0]
            return self._reply(handler, 200, [i for i in self.invoices.values()
                                              if not external_id or i["external_id"] == external_id])
        return self._reply(handler, 404, {"error_code": "NOT_FOUND", "message": parts.path})

    def _authorized(self, handler) -> bool:
        header = handler.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return False
        user, _, _ = base64.b64decode(header[6:]).decode().partition(":")
        return secrets.compare_digest(user, self.secret_key)

    def _create(self, handler, endpoint: str, create) -> None:
        with self._lock:
            fault = self._faults[endpoint].pop(0) if self._faults[endpoint] else None
        if fault == "5xx":
            return self._reply(handler, 503, {"error_code": "SERVER_ERROR", "message": "temporarily unavailable"})
        if fault == "429":
            return self._reply(handler, 429, {"error_code": "RATE_LIMIT_EXCEEDED", "message": "too many requests"})
        if fault == "400":
            return self._reply(handler, 400, {"error_code": "INVALID_DESTINATION", "message": "account not found"})
        with self._lock:
            status, obj = create()
        if endpoint == "invoices" and status == 200 and self.on_invoice_created:
            self.on_invoice_created(obj)
        if fault == "timeout":
            time.sleep(self.stall_seconds)  # the object exists; the client gave up waiting for this answer
        self._reply(handler, status, obj)

    def _invoice_create(self, body: dict) -> tuple[int, dict]:
        if not body.get("external_id") or not isinstance(body.get("amount"), (int, Decimal)) or body["amount"] <= 0:
            return 400, {"error_code": "API_VALIDATION_ERROR", "message": "external_id and amount are required"}
        invoice_id = secrets.token_hex(12)
        duration = int(body.get("invoice_duration") or 86400)
        invoice = {"id": invoice_id, "external_id": body["external_id"], "user_id": "emulator-business",
                   "status": "PENDING", "merchant_name": "Emulator", "amount": body["amount"],
                   "currency": body.get("currency", "IDR"), "description": body.get("description", ""),
                   "invoice_url": f"{self.url}/web/invoices/{invoice_id}",
                   "expiry_date": (datetime.now(UTC) + timedelta(seconds=duration)).isoformat().replace("+00:00", "Z"),
                   "created": _now(), "updated": _now(), "invoice_duration": duration}
        self.invoices[invoice_id] = invoice
        return 200, dict(invoice)

    def _payout_create(self, body: dict, headers) -> tuple[int, dict]:
        key = headers.get("Idempotency-key", "")
        if not key:
            return 400, {"error_code": "API_VALIDATION_ERROR", "message": "Idempotency-key header is required"}
        if key in self.idempotency_keys:
            if self.reused_key == "replay" and self._idempotency_bodies[key] == body:
                return 200, dict(self.payouts[self.idempotency_keys[key]])
            return 409, {"error_code": "DUPLICATE_ERROR", "message": "idempotency key has been used before"}
        properties = body.get("channel_properties") or {}
        if (not body.get("reference_id") or not str(body.get("channel_code", "")).startswith("PH_")
                or not properties.get("account_number") or not properties.get("account_holder_name")
                or not isinstance(body.get("amount"), (int, Decimal)) or body["amount"] <= 0):
            return 400, {"error_code": "API_VALIDATION_ERROR", "message": "invalid payout"}
        payout_id = "disb-" + secrets.token_hex(12)
        payout = {"id": payout_id, "business_id": "emulator-business", "reference_id": body["reference_id"],
                  "amount": body["amount"], "currency": body.get("currency"), "channel_code": body["channel_code"],
                  "channel_properties": properties, "description": body.get("description", ""),
                  "status": "ACCEPTED", "failure_code": None, "created": _now(), "updated": _now()}
        self.payouts[payout_id] = payout
        self.idempotency_keys[key] = payout_id
        self._idempotency_bodies[key] = body
        return 200, dict(payout)

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
