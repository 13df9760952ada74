"""Callbacks from the platform (docs/api.md, "Keys", "Callbacks"): verify with the platform public key of the body's
`key_version`, then route on `event` first, then `status` (docs/api.md, "Callbacks").

Framework glue: `handle_callback` (any framework), `django_view` and `wsgi_app`. Django is imported only
inside `django_view`, so this module works without it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from payments_merchant import signing
from payments_merchant.errors import CallbackVerificationError, UnknownCallbackError

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

logger = logging.getLogger("payments_merchant.callbacks")

PublicKeys: TypeAlias = Mapping[int, signing.PublicKeyLike]
SUCCESS_REPLY = "success"
PAYOUT_REVERSED = "payout.reversed"
REFUND_TERMINAL = "refund.terminal"
PAYOUT_TERMINAL_STATUSES = frozenset({"SUCCESS", "FAILED", "REJECTED"})
MAX_BODY_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class CollectionSuccess:
    """The pay-in callback, sent to the collection callback URL; process idempotently by `platform_order_no`."""

    platform_order_no: str
    mch_order_no: str
    amount: int
    currency: str
    status: str
    paid_at: int
    attach: str | None
    key_version: int
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class PayoutTerminal:
    """The payout callback: SUCCESS, FAILED or REJECTED (with `fail_reason` on the last two). `payout_query` has
    finished_at and attach."""

    platform_order_no: str
    mch_order_no: str
    amount: int
    fee: int
    currency: str
    status: str
    fail_reason: str | None
    key_version: int
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class PayoutReversed:
    """The reversal callback: a SUCCESS payout was returned; the order stays SUCCESS. Deduplicate by platform_order_no
    *and* this type, not by the order number alone."""

    platform_order_no: str
    mch_order_no: str
    amount: int
    fee: int
    currency: str
    reversed_at: int
    reversal_amount: int
    fee_refund: int
    key_version: int
    event: str = PAYOUT_REVERSED
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class RefundTerminal:
    """A refund reached SUCCESS or FAILED (with `fail_reason`), sent to the collection callback URL. Deduplicate by
    `refund_no`; `platform_order_no` is the refunded pay-in's."""

    mch_refund_no: str
    refund_no: str
    mch_order_no: str
    platform_order_no: str
    currency: str
    amount: int
    status: str
    finished_at: int
    fail_reason: str | None
    key_version: int
    event: str = REFUND_TERMINAL
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


CallbackEvent: TypeAlias = CollectionSuccess | PayoutTerminal | PayoutReversed | RefundTerminal


def _parse_body(body: bytes | str | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(body, Mapping):
        return dict(body)
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CallbackVerificationError("the callback body is not JSON") from exc
    if not isinstance(parsed, dict):
        raise CallbackVerificationError("the callback body is not a JSON object")
    return parsed


def verify_callback(body: bytes | str | Mapping[str, Any], public_keys: PublicKeys, *,
                    max_age_seconds: int | None = None) -> CallbackEvent:
    """Verify a callback and return it as a typed event.

    `public_keys` maps each platform key version to its public key (PEM or key object), as
    `manage.py platform_keys` publishes them; keep the old versions after a rotation. Raises
    `CallbackVerificationError` for an unknown key_version, a wrong sign_type or a bad signature, and
    `UnknownCallbackError` for a verified callback of a kind this SDK does not know. `max_age_seconds`, when
    given, also refuses a body whose `timestamp` is further than that from now (every retry is re-signed, so a
    genuine callback is always fresh).
    """
    fields = _parse_body(body)
    key_version = fields.get("key_version")
    if fields.get("sign_type") != signing.SIGN_TYPE:
        raise CallbackVerificationError("sign_type is not RSA2")
    if not isinstance(key_version, int) or isinstance(key_version, bool) or key_version not in public_keys:
        raise CallbackVerificationError(f"no platform public key for key_version {key_version!r}")
    signature = fields.get("sign")
    if not isinstance(signature, str) or not signing.verify(
            signing.load_public_key(public_keys[key_version]), fields, signature):
        raise CallbackVerificationError("the signature does not verify")
    if max_age_seconds is not None:
        timestamp = fields.get("timestamp")
        if not isinstance(timestamp, int) or abs(time.time() - timestamp) > max_age_seconds:
            raise CallbackVerificationError("the callback's timestamp is too old or in the future")
    return parse_event(fields)


def parse_event(fields: Mapping[str, Any]) -> CallbackEvent:
    """The typed event of a verified body: `event` first (`payout.reversed` and `refund.terminal` have one), then
    `status`."""
    try:
        if fields.get("event") == REFUND_TERMINAL:
            if fields.get("status") not in ("SUCCESS", "FAILED"):
                raise UnknownCallbackError(f"unknown refund status {fields.get('status')!r}")
            return RefundTerminal(
                mch_refund_no=fields["mch_refund_no"], refund_no=fields["refund_no"],
                mch_order_no=fields["mch_order_no"], platform_order_no=fields["platform_order_no"],
                currency=fields["currency"], amount=fields["amount"], status=fields["status"],
                finished_at=fields["finished_at"], fail_reason=fields.get("fail_reason") or None,
                key_version=fields["key_version"], raw=fields)
        if "event" in fields:
            if fields["event"] != PAYOUT_REVERSED:
                raise UnknownCallbackError(f"unknown callback event {fields['event']!r}")
            return PayoutReversed(
                platform_order_no=fields["platform_order_no"], mch_order_no=fields["mch_order_no"],
                amount=fields["amount"], fee=fields["fee"], currency=fields["currency"],
                reversed_at=fields["reversed_at"], reversal_amount=fields["reversal_amount"],
                fee_refund=fields["fee_refund"], key_version=fields["key_version"], raw=fields)
        status = fields.get("status")
        if status not in PAYOUT_TERMINAL_STATUSES:
            raise UnknownCallbackError(f"unknown callback status {status!r}")
        if "fee" in fields:  # a payout carries its fee; a collection success carries paid_at and no fee
            return PayoutTerminal(
                platform_order_no=fields["platform_order_no"], mch_order_no=fields["mch_order_no"],
                amount=fields["amount"], fee=fields["fee"], currency=fields["currency"], status=status,
                fail_reason=fields.get("fail_reason") or None, key_version=fields["key_version"], raw=fields)
        if status == "SUCCESS" and "paid_at" in fields:
            return CollectionSuccess(
                platform_order_no=fields["platform_order_no"], mch_order_no=fields["mch_order_no"],
                amount=fields["amount"], currency=fields["currency"], status=status, paid_at=fields["paid_at"],
                attach=fields.get("attach") or None, key_version=fields["key_version"], raw=fields)
        raise UnknownCallbackError("a callback that is neither a collection nor a payout")
    except KeyError as exc:
        raise UnknownCallbackError(f"the callback lacks {exc.args[0]}") from exc


def handle_callback(body: bytes | str | Mapping[str, Any], public_keys: PublicKeys,
                    on_event: Callable[[CallbackEvent], object]) -> tuple[int, str]:
    """Verify, hand the event to `on_event`, and give the HTTP (status, reply text) to send back.

    `success` (200) only when the body verified and `on_event` returned without raising; otherwise the
    platform retries later, so `on_event` must be idempotent (the same order can be notified more than once)
    and should check the amount against the merchant's own order.
    """
    try:
        event = verify_callback(body, public_keys)
    except CallbackVerificationError as exc:
        logger.warning("callback refused: %s", exc)
        return 400, "invalid callback"
    except UnknownCallbackError as exc:
        logger.error("verified callback not understood: %s", exc)
        return 422, "unknown callback"
    try:
        on_event(event)
    except Exception:  # noqa: BLE001 - any failure of the merchant's code means "not processed": retry later
        logger.exception("processing callback of %s failed", event.platform_order_no)
        return 500, "processing failed"
    return 200, SUCCESS_REPLY


def django_view(public_keys: PublicKeys, on_event: Callable[[CallbackEvent], object]) -> Callable[..., Any]:
    """A Django view (CSRF-exempt, POST only) for a callback URL:
    `path("payments/callback", django_view(PLATFORM_KEYS, on_event))`."""
    from django.http import HttpResponse, HttpResponseNotAllowed
    from django.views.decorators.csrf import csrf_exempt

    def view(request: Any) -> Any:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        status, reply = handle_callback(request.body, public_keys, on_event)
        return HttpResponse(reply, status=status, content_type="text/plain; charset=utf-8")

    exempt: Callable[..., Any] = csrf_exempt(view)  # the platform posts without a CSRF token
    return exempt


_REASONS = {200: "OK", 400: "Bad Request", 405: "Method Not Allowed", 413: "Payload Too Large",
            422: "Unprocessable Entity", 500: "Internal Server Error"}


def wsgi_app(public_keys: PublicKeys, on_event: Callable[[CallbackEvent], object]
             ) -> Callable[[WSGIEnvironment, StartResponse], Iterable[bytes]]:
    """A WSGI application answering callbacks POSTed to any path (mount it where the callback URL points)."""

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST":
            status, reply = 405, "POST only"
        else:
            try:
                length = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            if length > MAX_BODY_BYTES:
                status, reply = 413, "too large"
            else:
                status, reply = handle_callback(environ["wsgi.input"].read(length), public_keys, on_event)
        payload = reply.encode("utf-8")
        start_response(f"{status} {_REASONS.get(status, 'Error')}",
                       [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(payload)))])
        return [payload]

    return app
