"""The fuzzers' oracle: what every answer of the API must look like (docs/api.md, "Error codes"), written from that
page.

The code table below is copied from docs/api.md, "Error codes", by hand, not imported, so a drift between the page and
apps/common/errors.py fails test_contract_table_matches_error_codes instead of silently moving both sides.
"""

import json
import re
import time

from apps.common import signing
from apps.common.errors import ErrorCode

# docs/api.md, "Error codes": code -> HTTP statuses it may come with. 9999 is deliberately absent: no input may cause
# it.
CONTRACT_CODES: dict[str, set[int]] = {
    "0": {200}, "1000": {400}, "1001": {422}, "1002": {422}, "1003": {422}, "1004": {404, 405},
    "1101": {401}, "1102": {401}, "1103": {401}, "1104": {401}, "1105": {403}, "1106": {429},
    "2001": {409}, "2002": {404}, "2003": {422}, "2006": {422}, "2007": {422}, "2008": {422},
}
# Codes decided by the signature layer (docs/api.md, "Checks, in order"); a correctly signed, fresh request never gets
# one of them.
AUTH_CODES = {"1101", "1102", "1103", "1104", "1105", "1106"}
COMMON_FIELDS = ("merchant_no", "app_id", "key_version", "timestamp", "nonce", "sign_type", "sign")
NONCE_RE = re.compile(r"[A-Za-z0-9_-]{8,64}")
TOLERANCE_SECONDS = 300


def error_code_statuses(code: str) -> set[int]:
    return {e.http_status for e in ErrorCode if e.code == code}


def assert_envelope(status: int, content: bytes, context: object = "") -> dict:
    """Every response: no 5xx, JSON envelope {code, msg, data}, a code of the table with its HTTP status."""
    assert status < 500, f"HTTP {status} for {context!r}: {content[:300]!r}"
    try:
        body = json.loads(content)
    except ValueError:
        raise AssertionError(f"not JSON (HTTP {status}) for {context!r}: {content[:300]!r}") from None
    assert isinstance(body, dict) and set(body) == {"code", "msg", "data"}, f"not the envelope: {body!r}"
    code = body["code"]
    assert code in CONTRACT_CODES, f"code {code!r} is not in the contract's table ({context!r}): {body!r}"
    assert status in CONTRACT_CODES[code], f"code {code} came with HTTP {status}, contract says {CONTRACT_CODES[code]}"
    assert status in error_code_statuses(code), f"code {code} came with HTTP {status}, ErrorCode disagrees"
    assert isinstance(body["msg"], str) and body["msg"], body
    if code == "0":
        assert isinstance(body["data"], dict), body
    else:
        assert body["data"] is None, f"data must be null on error: {body!r}"
    return body


def is_flat_signable(body: object) -> bool:
    """Would docs/api.md, "The string to sign", step 4, accept this top-level object (strings, integers, booleans,
    null; valid UTF-8)?"""
    if not isinstance(body, dict):
        return False
    for key, value in body.items():
        if not _encodable(key):
            return False
        if value is None or isinstance(value, (bool, int)):
            continue
        if not isinstance(value, str) or not _encodable(value):
            return False
    return True


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, which JSON's \uD800 escape can carry
        return False
    return True


def passes_signature_layer(body: dict, *, merchant, now: float | None = None) -> bool:
    """Independent statement of the checks of docs/api.md, "Checks, in order", for `merchant` (a
    tests.helpers.MerchantCtx), nonce reuse aside."""
    now = time.time() if now is None else now
    timestamp = body.get("timestamp")
    return (
        body.get("sign_type") == "RSA2"
        and isinstance(body.get("sign"), str)
        and body.get("merchant_no") == merchant.merchant_no
        and body.get("app_id") == merchant.app_id
        and type(body.get("key_version")) is int and body["key_version"] == merchant.key_version
        and type(timestamp) is int and abs(now - timestamp) <= TOLERANCE_SECONDS + 1
        and isinstance(body.get("nonce"), str) and NONCE_RE.fullmatch(body["nonce"]) is not None
        and signing.verify(merchant.private_key.public_key(), body, body["sign"])
    )
