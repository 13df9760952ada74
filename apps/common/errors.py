"""The one table of API error codes (docs/api.md, "Error codes"). Views raise ApiError(ErrorCode.X, "sentence")."""

from enum import Enum


class ErrorCode(Enum):
    # name = (code, HTTP status, default message)
    OK = ("0", 200, "OK")
    INVALID_REQUEST = ("1000", 400, "The request is malformed.")
    CURRENCY_NOT_AVAILABLE = ("1001", 422, "The currency is not available.")
    PRODUCT_NOT_AVAILABLE = ("1002", 422, "The product_code is not available.")
    AMOUNT_OUT_OF_RANGE = ("1003", 422, "The amount is outside the product's limits.")
    NOT_FOUND_ENDPOINT = ("1004", 404, "No such endpoint.")
    METHOD_NOT_ALLOWED = ("1004", 405, "This endpoint does not take that method.")
    INVALID_SIGNATURE = ("1101", 401, "The signature is missing or invalid.")
    TIMESTAMP_OUT_OF_TOLERANCE = ("1102", 401, "The timestamp is outside the allowed tolerance.")
    NONCE_REUSED = ("1103", 401, "The nonce has already been used.")
    UNKNOWN_CREDENTIALS = ("1104", 401, "Unknown merchant_no, app_id or key_version.")
    MERCHANT_DISABLED = ("1105", 403, "The merchant or app is disabled.")
    RATE_LIMITED = ("1106", 429, "Rate limit exceeded.")
    DUPLICATE_ORDER = ("2001", 409, "mch_order_no was already used with different parameters.")
    ORDER_NOT_FOUND = ("2002", 404, "Order not found.")
    INSUFFICIENT_BALANCE = ("2003", 422, "Available balance is lower than amount + fee.")
    UNKNOWN_BANK_CODE = ("2006", 422, "bank_code is not in the bank code table of that currency.")
    ORDER_NOT_REFUNDABLE = ("2007", 422, "The order is not refundable.")
    REFUND_EXCEEDS_REFUNDABLE = ("2008", 422, "The refund exceeds the refundable amount.")
    INTERNAL_ERROR = ("9999", 500, "Internal error.")

    @property
    def code(self) -> str:
        return self.value[0]

    @property
    def http_status(self) -> int:
        return self.value[1]

    @property
    def default_message(self) -> str:
        return self.value[2]


class ApiError(Exception):
    """A failure the merchant is told about: an error code of the contract and a sentence."""

    def __init__(self, error: ErrorCode, msg: str | None = None):
        self.error = error
        self.msg = msg or error.default_message
        super().__init__(f"{error.code}: {self.msg}")


class DomainError(Exception):
    """A business rule refused an operation (raised by services; views map it to an ApiError)."""

    def __init__(self, error: ErrorCode, msg: str | None = None):
        self.error = error
        self.msg = msg or error.default_message
        super().__init__(self.msg)
