"""Merchant SDK of the payment platform: a signed API client, callback verification and a CLI."""

from payments_merchant.callbacks import (CallbackEvent, CollectionSuccess, PayoutReversed, PayoutTerminal,
                                         RefundTerminal, django_view, handle_callback, parse_event, verify_callback,
                                         wsgi_app)
from payments_merchant.client import DEFAULT_TIMEOUT, PaymentsClient, get_currencies
from payments_merchant.errors import (ERRORS_BY_CODE, AmountOutOfRangeError, CallbackVerificationError,
                                      CurrencyNotAvailableError, DuplicateOrderError, EndpointNotFoundError,
                                      InsufficientBalanceError, InternalServerError, InvalidRequestError,
                                      InvalidSignatureError, MerchantDisabledError, NonceReusedError,
                                      OrderNotFoundError, OrderNotRefundableError, PaymentsError,
                                      ProductNotAvailableError, RateLimitedError, RefundExceedsRefundableError, StatementVerificationError, TimestampOutOfToleranceError,
                                      TransportError,
                                      UnknownBankCodeError, UnknownCallbackError, UnknownCredentialsError)
from payments_merchant.models import (Balance, CallbackEventPage, Currency, PayOrder, PayoutOrder,
                                      PayoutQueryResult, PayQueryResult, Refund, Statement)
from payments_merchant.signing import load_private_key, load_public_key, sign, string_to_sign, verify
from payments_merchant.statements import statement_is_final, verify_statement

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_TIMEOUT", "ERRORS_BY_CODE", "AmountOutOfRangeError", "Balance", "CallbackEvent", "CallbackEventPage",
    "CallbackVerificationError", "CollectionSuccess", "Currency", "CurrencyNotAvailableError",
    "DuplicateOrderError", "EndpointNotFoundError", "InsufficientBalanceError", "InternalServerError",
    "InvalidRequestError", "InvalidSignatureError", "MerchantDisabledError", "NonceReusedError",
    "OrderNotFoundError", "OrderNotRefundableError", "PayOrder", "PayQueryResult", "PaymentsClient", "PaymentsError", "PayoutOrder",
    "PayoutQueryResult", "PayoutReversed", "PayoutTerminal", "ProductNotAvailableError", "RateLimitedError", "Refund",
    "RefundExceedsRefundableError", "RefundTerminal",
    "Statement", "StatementVerificationError", "TimestampOutOfToleranceError", "TransportError", "UnknownBankCodeError", "UnknownCallbackError",
    "UnknownCredentialsError", "django_view", "get_currencies", "handle_callback", "load_private_key",
    "load_public_key", "parse_event", "sign", "statement_is_final", "string_to_sign", "verify", "verify_callback",
    "verify_statement", "wsgi_app",
]
