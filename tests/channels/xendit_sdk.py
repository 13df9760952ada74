"""Xendit's own SDK (xendit-python 7.0.0, generated from Xendit's OpenAPI specs) as the judge of the emulator: its
client pointed at the emulator, and its models reading every answer the emulator gave (tests/channels/
test_xendit_sdk.py, and every Xendit test's emulator at teardown: tests/channels/conftest.py)."""

import json
import re
from types import SimpleNamespace

import xendit
from xendit.apis import InvoiceApi, PayoutApi, RefundApi
from xendit.invoice.model.forbidden_error import ForbiddenError
from xendit.invoice.model.invoice import Invoice
from xendit.invoice.model.invoice_error404_response_definition import InvoiceError404ResponseDefinition
from xendit.invoice.model.server_error import ServerError
from xendit.invoice.model.unauthorized_error import UnauthorizedError
from xendit.payout.model.channel import Channel as PayoutChannel
from xendit.payout.model.error import Error
from xendit.payout.model.get_payouts200_response import GetPayouts200Response
from xendit.payout.model.get_payouts200_response_data_inner import GetPayouts200ResponseDataInner
from xendit.refund.model.create_refund400_response import CreateRefund400Response
from xendit.refund.model.create_refund403_response import CreateRefund403Response
from xendit.refund.model.create_refund404_response import CreateRefund404Response
from xendit.refund.model.create_refund409_response import CreateRefund409Response
from xendit.refund.model.create_refund503_response import CreateRefund503Response
from xendit.refund.model.refund import Refund
from xendit.refund.model.refund_list import RefundList


def sdk_client(emulator, *, api_key: str | None = None) -> xendit.ApiClient:
    """The SDK's ApiClient with the emulator as its host (Configuration(host=...)), authenticated as the SDK does it
    (HTTP Basic, the key as user name)."""
    return xendit.ApiClient(xendit.Configuration(host=emulator.url,
                                                 api_key=emulator.secret_key if api_key is None else api_key))


def sdk_apis(emulator, **kwargs) -> tuple[InvoiceApi, PayoutApi]:
    client = sdk_client(emulator, **kwargs)
    return InvoiceApi(client), PayoutApi(client)


def sdk_refunds(emulator, **kwargs) -> RefundApi:
    return RefundApi(sdk_client(emulator, **kwargs))


# (method, path pattern) → the response type the SDK's endpoint declares for a 2xx answer. The SDK creates invoices at
# "/v2/invoices/", Xendit's documented curl (and our adapter) at "/v2/invoices": the emulator serves both.
SUCCESS_TYPES = [
    ("POST", r"/v2/invoices/?", (Invoice,)),
    ("GET", r"/v2/invoices/[^/]+", (Invoice,)),
    ("GET", r"/v2/invoices", ([Invoice],)),
    ("POST", r"/invoices/[^/]+/expire!", (Invoice,)),
    ("POST", r"/v2/payouts", (GetPayouts200ResponseDataInner,)),
    ("GET", r"/v2/payouts/[^/]+", (GetPayouts200ResponseDataInner,)),
    ("POST", r"/v2/payouts/[^/]+/cancel", (GetPayouts200ResponseDataInner,)),
    ("GET", r"/v2/payouts", (GetPayouts200Response,)),
    ("GET", r"/payouts_channels", ([PayoutChannel],)),
    ("POST", r"/refunds", (Refund,)),
    ("GET", r"/refunds/[^/]+", (Refund,)),
    ("GET", r"/refunds", (RefundList,)),
]

# The Invoice API's error models by status (its spec names one per status; a 404 is read with get_invoice_by_id's
# INVOICE_NOT_FOUND_ERROR model also for expire!, whose own 404 model enumerates only virtual-account codes); errors
# it does not enumerate (400
# API_VALIDATION_ERROR, 429 RATE_LIMIT_EXCEEDED) and every Payouts API error are read with the Payouts API's Error
# model ({error_code, message, errors?}), the shape all Xendit errors share.
INVOICE_ERROR_TYPES = {401: UnauthorizedError, 403: ForbiddenError, 404: InvoiceError404ResponseDefinition,
                       500: ServerError, 503: ServerError}
# The Refund API's error models by status (create_refund's spec; get_refund's 404 is the same shape).
REFUND_ERROR_TYPES = {400: CreateRefund400Response, 403: CreateRefund403Response, 404: CreateRefund404Response,
                      409: CreateRefund409Response, 503: CreateRefund503Response}


def sdk_type(method: str, path: str, status: int):
    if status < 300:
        for known_method, pattern, response_type in SUCCESS_TYPES:
            if method == known_method and re.fullmatch(pattern, path):
                return response_type
        raise AssertionError(f"the SDK has no endpoint {method} {path}")
    if "invoices" in path and status in INVOICE_ERROR_TYPES:
        return (INVOICE_ERROR_TYPES[status],)
    if path.startswith("/refunds") and status in REFUND_ERROR_TYPES:
        return (REFUND_ERROR_TYPES[status],)
    return (Error,)


def sdk_read(client: xendit.ApiClient, body, response_type):
    """Deserialize a JSON answer exactly as the SDK's ApiClient does after a call (type-checked, enums checked)."""
    return client.deserialize(SimpleNamespace(data=json.dumps(body)), response_type, True)


def assert_sdk_reads_every_answer(emulator) -> int:
    """Every JSON answer the emulator gave (emulator.answers) read by the SDK model of its endpoint and status;
    raises the SDK's own error (ApiTypeError / ApiValueError) on the first it refuses. Returns how many were read."""
    client = sdk_client(emulator)
    for method, path, status, body in list(emulator.answers):
        try:
            sdk_read(client, body, sdk_type(method, path, status))
        except Exception as exc:
            raise AssertionError(f"xendit-python cannot read the emulator's answer to {method} {path} "
                                 f"({status}): {exc}\n{body}") from exc
    return len(emulator.answers)
