"""Signed-request authentication for every endpoint under /openapi/v1/ (docs/api.md, "Checks, in order"), checks in
its order."""

import re
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from rest_framework.authentication import BaseAuthentication

from apps.common import signing
from apps.common.cache_scripts import cache_script
from apps.common.errors import ApiError, ErrorCode
from apps.merchants.models import App, Merchant, MerchantKey
from apps.merchants.selectors import merchant_key_for_request, public_key_object

COMMON_FIELDS = ("merchant_no", "app_id", "key_version", "timestamp", "nonce", "sign_type", "sign")
# Matched with fullmatch: the value as sent, so "M10000001\n" is 1000, not an unknown merchant (docs/api.md, "Field
# formats", "Checks, in order").
NONCE_RE = re.compile(r"[A-Za-z0-9_-]{8,64}")
IDENTIFIER_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass
class SignedMerchant:
    """request.user of a signed request: the merchant, app and key that signed it."""

    merchant: Merchant
    app: App
    key: MerchantKey
    is_authenticated: bool = True


def _require_string(body: dict, field: str, pattern: re.Pattern | None = None) -> str:
    value = body.get(field)
    if signing.is_absent(value):
        raise ApiError(ErrorCode.INVALID_REQUEST, f"{field} is required.")
    if not isinstance(value, str):
        raise ApiError(ErrorCode.INVALID_REQUEST, f"{field} must be a string.")
    if pattern and not pattern.fullmatch(value):
        raise ApiError(ErrorCode.INVALID_REQUEST, f"{field} has an invalid format.")
    return value


def _require_integer(body: dict, field: str) -> int:
    value = body.get(field)
    if signing.is_absent(value):
        raise ApiError(ErrorCode.INVALID_REQUEST, f"{field} is required.")
    if type(value) is not int:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"{field} must be an integer.")
    return value


def _nonce_key(merchant_id: int, nonce: str) -> str:
    return f"nonce:{merchant_id}:{nonce}"


def _rate_key(merchant_id: int) -> str:
    return f"rate:{merchant_id}:{int(time.time())}"


# One round trip to Redis instead of four (Django's cache API: add and incr for the window, which is EXISTS then
# INCRBY, then add for the nonce), and no redis-py client built per call: balance 2.25 -> 1.47 ms CPU, pay/create
# 2.17 -> 1.76 (bench/profile_endpoint.py, docs/performance.md). Counts the request in its one-second window, then
# claims the nonce only if the request is admitted. Returns 0 admitted, 1 over the rate limit, 2 nonce already used.
_ADMIT = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], 5) end
if n > tonumber(ARGV[1]) then return 1 end
if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[2]) then return 0 end
return 2
"""


def request_admit(*, merchant_id: int, nonce: str) -> ErrorCode | None:
    """Spend one unit of the merchant's rate budget, then the nonce; the error if refused. On the cache's Redis, in
    one script."""
    script = cache_script(_ADMIT)
    keys = [cache.make_key(_rate_key(merchant_id)), cache.make_key(_nonce_key(merchant_id, nonce))]
    outcome = script(keys=keys, args=[settings.RATE_LIMIT_PER_SECOND, settings.NONCE_TTL_SECONDS])
    return {0: None, 1: ErrorCode.RATE_LIMITED, 2: ErrorCode.NONCE_REUSED}[int(outcome)]


class SignedRequestAuthentication(BaseAuthentication):
    def authenticate(self, request):
        body = request.data  # FlatJSONParser: not a flat JSON object -> 1000
        sign = body.get("sign")
        if signing.is_absent(sign) or not isinstance(sign, str):
            raise ApiError(ErrorCode.INVALID_SIGNATURE, "sign is missing.")
        if body.get("sign_type") != signing.SIGN_TYPE:
            raise ApiError(ErrorCode.INVALID_SIGNATURE, "sign_type must be RSA2.")

        merchant_no = _require_string(body, "merchant_no", IDENTIFIER_RE)
        app_id = _require_string(body, "app_id", IDENTIFIER_RE)
        key_version = _require_integer(body, "key_version")
        timestamp = _require_integer(body, "timestamp")
        nonce = _require_string(body, "nonce")
        if not NONCE_RE.fullmatch(nonce):
            raise ApiError(ErrorCode.INVALID_REQUEST, "nonce must be 8-64 characters of A-Z a-z 0-9 _ -.")

        key = merchant_key_for_request(merchant_no=merchant_no, app_id=app_id, key_version=key_version)
        if key is None:
            raise ApiError(ErrorCode.UNKNOWN_CREDENTIALS)
        if key.revoked_at is not None:
            raise ApiError(ErrorCode.UNKNOWN_CREDENTIALS, "key_version is revoked.")
        # A version uploaded in the portal waits for a second owner or its delay (docs/portal.md, "Key confirmation").
        if key.live_from is not None and key.live_from.timestamp() > time.time():
            raise ApiError(ErrorCode.UNKNOWN_CREDENTIALS, "key_version is not live yet.")
        if not key.merchant.is_active or not key.app.is_active:
            raise ApiError(ErrorCode.MERCHANT_DISABLED)

        # Whole seconds on both sides: exactly the tolerance is accepted, one second more is not.
        if abs(int(time.time()) - timestamp) > settings.SIGNATURE_TIMESTAMP_TOLERANCE_SECONDS:
            raise ApiError(ErrorCode.TIMESTAMP_OUT_OF_TOLERANCE)
        if not signing.verify(public_key_object(key.public_key_pem), body, sign):
            raise ApiError(ErrorCode.INVALID_SIGNATURE, "sign does not verify with the merchant's key.")
        # Only a verified request may spend a nonce or the merchant's rate budget, so a forger can burn neither.
        refusal = request_admit(merchant_id=key.merchant_id, nonce=nonce)
        if refusal is not None:
            raise ApiError(refusal)
        return SignedMerchant(merchant=key.merchant, app=key.app, key=key), key

    def authenticate_header(self, request):
        return "RSA2"
