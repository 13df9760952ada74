"""The signed API client: adds the common parameters, signs and parses the envelope (docs/api.md, "Signing",
"Error codes")."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import requests

from payments_merchant import signing
from payments_merchant.errors import PaymentsError, TransportError, error_for
from payments_merchant.models import (Balance, CallbackEventPage, Currency, PayOrder, PayoutOrder,
                                      PayoutQueryResult, PayQueryResult, Refund, Statement)

DEFAULT_TIMEOUT: float = 10.0
Timeout = float | tuple[float, float]


def _envelope_data(response: requests.Response) -> Any:
    """`data` of a success envelope, else the typed error of its code."""
    try:
        envelope = response.json()
    except ValueError:
        envelope = None
    if not isinstance(envelope, dict) or not isinstance(envelope.get("code"), str):
        raise TransportError(f"HTTP {response.status_code} without the platform's JSON envelope",
                             http_status=response.status_code)
    if envelope["code"] != "0":
        raise error_for(envelope["code"], str(envelope.get("msg") or ""), response.status_code)
    return envelope.get("data")


def _request(session: requests.Session, method: str, url: str, *, timeout: Timeout,
             body: bytes | None = None) -> requests.Response:
    try:
        return session.request(method, url, data=body, timeout=timeout,
                               headers={"Content-Type": "application/json", "Accept": "application/json"},
                               allow_redirects=False)
    except requests.RequestException as exc:
        raise TransportError(f"{type(exc).__name__}: {exc}") from exc


def _send(session: requests.Session, method: str, url: str, *, timeout: Timeout, body: bytes | None = None) -> Any:
    return _envelope_data(_request(session, method, url, timeout=timeout, body=body))


def get_currencies(api_root: str, *, timeout: Timeout = DEFAULT_TIMEOUT,
                   session: requests.Session | None = None) -> list[Currency]:
    """`GET {api_root}/currencies` (docs/api.md, "Endpoints"): public, unsigned."""
    data = _send(session or requests.Session(), "GET", f"{api_root.rstrip('/')}/currencies", timeout=timeout)
    return [Currency.from_data(item) for item in data["items"]]


class PaymentsClient:
    """One merchant app's signed client.

    `private_key` is the merchant's RSA private key (a key object or its PEM); `key_version` the version the
    platform registered its public half under. `timeout` is seconds for the whole read, or (connect, read).
    A create that ends in `TransportError` may or may not have happened: repeat it with the same parameters
    (an identical create returns the original order) or query it.
    """

    def __init__(self, *, api_root: str, merchant_no: str, app_id: str, private_key: signing.PrivateKeyLike,
                 key_version: int = 1, timeout: Timeout = DEFAULT_TIMEOUT,
                 session: requests.Session | None = None) -> None:
        self.api_root = api_root.rstrip("/")
        self.base_url = f"{self.api_root}/openapi/v1"
        self.merchant_no = merchant_no
        self.app_id = app_id
        self.key_version = key_version
        self.timeout = timeout
        self.session = session or requests.Session()
        self._private_key = signing.load_private_key(private_key)

    @classmethod
    def from_key_file(cls, key_file: str | Path, *, password: bytes | None = None, **kwargs: Any) -> PaymentsClient:
        """A client whose private key is read from a PEM file."""
        return cls(private_key=signing.load_private_key_file(key_file, password), **kwargs)

    # Override points (a clock that is known to be off, nonces from elsewhere).
    def now(self) -> int:
        return int(time.time())

    def new_nonce(self) -> str:
        return signing.new_nonce()

    def signed_body(self, business: Mapping[str, Any]) -> dict[str, Any]:
        """`business` plus the common parameters (docs/api.md, "Signing"), signed."""
        body: dict[str, Any] = {key: value for key, value in business.items() if value is not None}
        body.update(merchant_no=self.merchant_no, app_id=self.app_id, key_version=self.key_version,
                    timestamp=self.now(), nonce=self.new_nonce(), sign_type=signing.SIGN_TYPE)
        body["sign"] = signing.sign(self._private_key, body)
        return body

    def post(self, path: str, business: Mapping[str, Any] | None = None) -> requests.Response:
        """POST a signed request to `{base_url}/{path}`; the HTTP response as it came."""
        body = self.signed_body(business or {})
        raw = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        return _request(self.session, "POST", f"{self.base_url}/{path.lstrip('/')}", timeout=self.timeout, body=raw)

    def call(self, path: str, business: Mapping[str, Any] | None = None) -> Any:
        """POST a signed request to `{base_url}/{path}`; the envelope's `data`, or the typed error of its code."""
        return _envelope_data(self.post(path, business))

    def balance(self, currency: str | None = None) -> Balance:
        """`balance` (docs/api.md, "Endpoints"): one currency; the platform's default is PHP."""
        return Balance.from_data(self.call("balance", {"currency": currency}))

    def currencies(self) -> list[Currency]:
        """`GET /currencies` (public; sent unsigned)."""
        return get_currencies(self.api_root, timeout=self.timeout, session=self.session)

    def pay_create(self, *, mch_order_no: str, product_code: str, amount: int, currency: str,
                   subject: str | None = None, return_url: str | None = None, expire_seconds: int | None = None,
                   attach: str | None = None) -> PayOrder:
        """`pay/create` (docs/api.md, "Endpoints"): amount in minor units (an int)."""
        return PayOrder.from_data(self.call("pay/create", {
            "mch_order_no": mch_order_no, "product_code": product_code, "amount": _amount(amount),
            "currency": currency, "subject": subject, "return_url": return_url, "expire_seconds": expire_seconds,
            "attach": attach}))

    def pay_query(self, *, mch_order_no: str | None = None, platform_order_no: str | None = None) -> PayQueryResult:
        """`pay/query` (docs/api.md, "Endpoints") by either number; platform_order_no wins when both are given."""
        return PayQueryResult.from_data(self.call("pay/query", _order_numbers(mch_order_no, platform_order_no)))

    def payout_create(self, *, mch_order_no: str, product_code: str, amount: int, currency: str, payee_name: str,
                      payee_account: str, bank_code: str, attach: str | None = None) -> PayoutOrder:
        """`payout/create` (docs/api.md, "Endpoints"): amount + fee is frozen at once; APPROVED or FROZEN for review."""
        return PayoutOrder.from_data(self.call("payout/create", {
            "mch_order_no": mch_order_no, "product_code": product_code, "amount": _amount(amount),
            "currency": currency, "payee_name": payee_name, "payee_account": payee_account,
            "bank_code": bank_code, "attach": attach}))

    def payout_query(self, *, mch_order_no: str | None = None,
                     platform_order_no: str | None = None) -> PayoutQueryResult:
        """`payout/query` (docs/api.md, "Endpoints") by either number."""
        return PayoutQueryResult.from_data(self.call("payout/query", _order_numbers(mch_order_no, platform_order_no)))

    def refund_create(self, *, mch_refund_no: str, amount: int, mch_order_no: str | None = None,
                      platform_order_no: str | None = None, reason: str | None = None) -> Refund:
        """`refund/create` (docs/api.md, "Refunds"): gives `amount` of a paid order back; held from available at
        once, PROCESSING until the channel answers. The same mch_refund_no with the same fields replays the refund."""
        return Refund.from_data(self.call("refund/create", {
            **_order_numbers(mch_order_no, platform_order_no), "mch_refund_no": mch_refund_no,
            "amount": _amount(amount), "reason": reason}))

    def refund_query(self, *, mch_refund_no: str | None = None, refund_no: str | None = None) -> Refund:
        """`refund/query` (docs/api.md, "Refunds") by either number; refund_no wins when both are given."""
        if not mch_refund_no and not refund_no:
            raise ValueError("give mch_refund_no or refund_no")
        return Refund.from_data(self.call("refund/query", {"mch_refund_no": mch_refund_no, "refund_no": refund_no}))

    def callback_events(self, *, platform_order_no: str | None = None, type: str | None = None,
                        status: str | None = None, created_from: int | None = None, created_to: int | None = None,
                        limit: int | None = None, cursor: str | None = None) -> CallbackEventPage:
        """`callbacks/list` (docs/api.md, "Callback events: list and re-send"): one page of this merchant's callback
        events, newest first, with their attempts and the last body sent. Times are Unix seconds, both bounds
        inclusive."""
        return CallbackEventPage.from_data(self.call("callbacks/list", {
            "platform_order_no": platform_order_no, "type": type, "status": status, "created_from": created_from,
            "created_to": created_to, "limit": limit, "cursor": cursor}))

    def iter_callback_events(self, **filters: Any) -> Iterator[Mapping[str, Any]]:
        """Every event matching `filters` (the arguments of `callback_events` but `cursor`), page after page."""
        cursor = None
        while True:
            page = self.callback_events(cursor=cursor, **filters)
            yield from page.events
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def callback_resend(self, *, event_id: int | None = None, platform_order_no: str | None = None,
                        type: str | None = None) -> Mapping[str, Any]:
        """`callbacks/resend` (docs/api.md, "Callback events: list and re-send"): one more attempt of a delivered or
        dead event, freshly signed; by `event_id`, or by `platform_order_no` and `type`."""
        data: Mapping[str, Any] = self.call("callbacks/resend", {"event_id": event_id,
                                                                 "platform_order_no": platform_order_no,
                                                                 "type": type})
        return data

    def statement(self, *, date: str, currency: str) -> Statement:
        """`statement` (docs/api.md, "Statements"): one day's balance movements in one currency, signed by the
        platform."""
        return Statement.from_data(self.call("statement", {"date": date, "currency": currency}))

    def statement_csv(self, *, date: str, currency: str) -> bytes:
        """The same statement as its signed CSV file: keep these bytes (`verify_statement` checks them)."""
        response = self.post("statement", {"date": date, "currency": currency, "format": "csv"})
        if response.status_code == 200 and response.headers.get("Content-Type", "").startswith("text/csv"):
            return response.content
        _envelope_data(response)  # raises the typed error of the envelope
        raise TransportError(f"HTTP {response.status_code}: not a CSV statement", http_status=response.status_code)


def _amount(amount: int) -> int:
    if isinstance(amount, bool) or not isinstance(amount, int):
        raise TypeError("amount is an int of minor units (e.g. 10000 for 100.00)")
    return amount


def _order_numbers(mch_order_no: str | None, platform_order_no: str | None) -> dict[str, Any]:
    if not mch_order_no and not platform_order_no:
        raise ValueError("give mch_order_no or platform_order_no")
    return {"mch_order_no": mch_order_no, "platform_order_no": platform_order_no}


__all__ = ["DEFAULT_TIMEOUT", "PaymentsClient", "PaymentsError", "get_currencies"]
