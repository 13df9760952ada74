"""Typed errors: one class per error code of the platform (docs/api.md, "Error codes"), all under `PaymentsError`."""

from __future__ import annotations


class PaymentsError(Exception):
    """An answer of the platform that is not a success, or no usable answer at all.

    `code` is the envelope's code (a string such as "1001"), `msg` its message, `http_status` the HTTP status
    (None when no response arrived). Codes this SDK does not know are raised as this base class.
    """

    code: str = ""
    default_http_status: int | None = None

    def __init__(self, msg: str, *, code: str | None = None, http_status: int | None = None) -> None:
        super().__init__(f"{code or self.code}: {msg}" if (code or self.code) else msg)
        if code is not None:
            self.code = code
        self.msg = msg
        self.http_status = http_status


class InvalidRequestError(PaymentsError):
    """1000 (400): malformed body, missing or ill-typed field, value out of its format."""
    code = "1000"
    default_http_status = 400


class CurrencyNotAvailableError(PaymentsError):
    """1001 (422): unknown currency (balance); not enabled, inactive or unserved (create endpoints)."""
    code = "1001"
    default_http_status = 422


class ProductNotAvailableError(PaymentsError):
    """1002 (422): product_code unknown, not enabled, of the wrong kind or not for that currency."""
    code = "1002"
    default_http_status = 422


class AmountOutOfRangeError(PaymentsError):
    """1003 (422): amount outside the product's minimum/maximum."""
    code = "1003"
    default_http_status = 422


class EndpointNotFoundError(PaymentsError):
    """1004 (404/405): no such endpoint, or a method it does not take."""
    code = "1004"
    default_http_status = 404


class InvalidSignatureError(PaymentsError):
    """1101 (401): sign missing or not verifying, or sign_type not RSA2 (wrong key for the key_version?)."""
    code = "1101"
    default_http_status = 401


class TimestampOutOfToleranceError(PaymentsError):
    """1102 (401): timestamp more than 300 s from the platform's time: check this machine's clock."""
    code = "1102"
    default_http_status = 401


class NonceReusedError(PaymentsError):
    """1103 (401): nonce already used by this merchant within 600 s."""
    code = "1103"
    default_http_status = 401


class UnknownCredentialsError(PaymentsError):
    """1104 (401): unknown merchant_no, app_id not of that merchant, unknown or revoked key_version."""
    code = "1104"
    default_http_status = 401


class MerchantDisabledError(PaymentsError):
    """1105 (403): merchant or app disabled."""
    code = "1105"
    default_http_status = 403


class RateLimitedError(PaymentsError):
    """1106 (429): too many requests in one second; the same request can be retried a second later."""
    code = "1106"
    default_http_status = 429


class DuplicateOrderError(PaymentsError):
    """2001 (409): mch_order_no already used with different business parameters."""
    code = "2001"
    default_http_status = 409


class OrderNotFoundError(PaymentsError):
    """2002 (404): no such order for this merchant."""
    code = "2002"
    default_http_status = 404


class InsufficientBalanceError(PaymentsError):
    """2003 (422): available balance lower than amount + fee."""
    code = "2003"
    default_http_status = 422


class UnknownBankCodeError(PaymentsError):
    """2006 (422): bank_code not in the bank code table of that currency."""
    code = "2006"
    default_http_status = 422


class OrderNotRefundableError(PaymentsError):
    """2007 (422): the order cannot be refunded: not paid, or its channel does not take the refund."""
    code = "2007"
    default_http_status = 422


class RefundExceedsRefundableError(PaymentsError):
    """2008 (422): the amount is more than the order can still be refunded (paid minus refunds not FAILED)."""
    code = "2008"
    default_http_status = 422


class InternalServerError(PaymentsError):
    """9999 (500): the platform failed; for a create, query the order before trying another mch_order_no."""
    code = "9999"
    default_http_status = 500


class TransportError(PaymentsError):
    """No envelope came back: connection refused, timeout, or a reply that is not the platform's JSON envelope
    (a proxy's error page). For a create the outcome is unknown: repeat it with the same mch_order_no (an
    identical create replays the original order) or query it."""
    code = ""


ERRORS_BY_CODE: dict[str, type[PaymentsError]] = {
    cls.code: cls
    for cls in (InvalidRequestError, CurrencyNotAvailableError, ProductNotAvailableError, AmountOutOfRangeError,
                EndpointNotFoundError, InvalidSignatureError, TimestampOutOfToleranceError, NonceReusedError,
                UnknownCredentialsError, MerchantDisabledError, RateLimitedError, DuplicateOrderError,
                OrderNotFoundError, InsufficientBalanceError, UnknownBankCodeError, OrderNotRefundableError,
                RefundExceedsRefundableError, InternalServerError)
}


def error_for(code: str, msg: str, http_status: int | None = None) -> PaymentsError:
    """The typed error of an envelope's code; an unknown code gives the base class with that code."""
    cls = ERRORS_BY_CODE.get(code, PaymentsError)
    return cls(msg, code=code, http_status=http_status)


class CallbackVerificationError(ValueError):
    """A callback that must not be processed: not a JSON object, unknown key_version, wrong sign_type or a
    signature that does not verify (docs/api.md, "Keys": never answer it with `success`)."""


class StatementVerificationError(ValueError):
    """A statement whose body does not hash to its digest, of an unknown key_version, or whose signature does not
    verify: it is not what the platform issued."""


class UnknownCallbackError(ValueError):
    """A verified callback of a kind this SDK version does not know (a new `event` or `status`)."""
