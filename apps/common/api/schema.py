"""OpenAPI description of the signed endpoints: the common signed fields, the error envelope, one worked example
per endpoint, and the API's introduction (signing rules, error table) that the docs page at /openapi/v1/docs/
shows. The error table is generated from apps/common/errors.py, the worked string to sign from apps/common/signing.py."""

import json

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, inline_serializer
from rest_framework import serializers

from apps.common import signing
from apps.common.errors import ErrorCode

SIGNED_FIELDS_DESCRIPTION = (
    "Signed endpoint (RSA2, see docs/api.md). Besides its business fields the JSON body carries merchant_no, "
    "app_id, key_version, timestamp (Unix seconds, within 300 s of server time), nonce (8-64 of A-Za-z0-9_-, "
    "single use for 600 s), sign_type=RSA2 and sign: base64 RSASSA-PKCS1-v1_5 SHA-256 over the UTF-8 string "
    "key=value&... of every top-level field except sign, null and empty-string values dropped, sorted by key "
    "(byte order), integers in decimal, booleans true/false. Top-level objects, arrays and non-integer numbers "
    "are refused (1000). Every response, error or not, is the envelope {code, msg, data}; data is null on error."
)


class ErrorEnvelopeSerializer(serializers.Serializer):
    """The envelope of every failed request (docs/api.md, "Error codes")."""

    code = serializers.CharField(help_text="Error code, e.g. \"1101\" (see docs/api.md for the table).")
    msg = serializers.CharField(help_text="A sentence naming the offending field where there is one.")
    data = serializers.JSONField(allow_null=True, default=None, help_text="Always null on error.")


def _common_fields() -> dict:
    return {
        "merchant_no": serializers.CharField(help_text="Merchant identifier, e.g. M10000001."),
        "app_id": serializers.CharField(help_text="Application identifier of that merchant, e.g. A10000001."),
        "key_version": serializers.IntegerField(help_text="Version of the merchant key that signed (JSON integer)."),
        "timestamp": serializers.IntegerField(help_text="Unix seconds (JSON integer); within ±300 s of server time."),
        "nonce": serializers.RegexField(r"^[A-Za-z0-9_-]{8,64}$", help_text="Random, single use per merchant for 600 s."),
        "sign_type": serializers.ChoiceField(choices=["RSA2"]),
        "sign": serializers.CharField(help_text="Standard base64 (with padding) RSASSA-PKCS1-v1_5 SHA-256 signature."),
    }


class StrictChoiceFieldExtension(OpenApiSerializerFieldExtension):
    """A StrictChoiceField is a string of a fixed set: an enum in the schema (drf-spectacular sees a CharField)."""

    target_class = "apps.common.api.fields.StrictChoiceField"

    def map_serializer_field(self, auto_schema, direction):
        return {"type": "string", "enum": list(self.target.choices)}


def _codes_for(status: int) -> str:
    return "; ".join(f"{e.code}: {e.default_message}" for e in ErrorCode if e.http_status == status)


# The common fields of every request example: the worked example of docs/api.md, "Signing".
EXAMPLE_COMMON_FIELDS = {"merchant_no": "M10000001", "app_id": "A10000001", "key_version": 1,
                         "timestamp": 1700000000, "nonce": "3f9c2a7b1d4e4c0a", "sign_type": "RSA2"}
# The signature of the balance example with the test key tests/common/vectors/merchant_rsa2048_private.pem
# (tests/common/test_docs_page.py checks it); the other examples show where a signature goes.
EXAMPLE_BALANCE_SIGNATURE = (
    "Jkaw9Cva3n8uIxBFpl3rDuJaxH1MtBo7hWrkOtpJAiBwGrkw1i8LzFm5M5Q0dmVgFrgiIGxMrpCybwOmo886uDKgweLZ0YGdZ6twx3N9BMHo4zr0"
    "w4jRy5SNDcxQlZOKwYVsqb7ksyFSqzFl2AJjhsQIDxitSzamu6o+rAayYkLhsmk2Cd4R714fWeVqXOVxDxKmgAYhfzSh02bG2Z1/ykT367cY3Gwr"
    "AwECn5zp+LZ2nLH6aFpidVFJAzf6rUPY04lSL7VOUAdccZHguEvmIRbQZlwjE2JpF5na89ukX5ct70M/P9hKLiUQWytt7Vdv1mwBnMeDKm4N9ORp"
    "nex7aQ==")
EXAMPLE_BALANCE_BUSINESS = {"currency": "PHP"}
EXAMPLE_SIGNATURE_PLACEHOLDER = "<base64 RSASSA-PKCS1-v1_5 SHA-256 signature of the string to sign>"


def signed_example_body(business: dict) -> dict:
    """A request example: the business fields, the common fields, and `sign`."""
    body = {**business, **EXAMPLE_COMMON_FIELDS}
    real = business == EXAMPLE_BALANCE_BUSINESS
    return {**body, "sign": EXAMPLE_BALANCE_SIGNATURE if real else EXAMPLE_SIGNATURE_PLACEHOLDER}


def endpoint_examples(request: dict, data: dict) -> list[OpenApiExample]:
    """One worked request (with its string to sign) and its success envelope."""
    body = signed_example_body(request)
    text = signing.string_to_sign(body).decode("utf-8")
    return [
        OpenApiExample("request", value=body, request_only=True, description=f"String to sign:\n\n    {text}"),
        OpenApiExample("success", value={"code": "0", "msg": "OK", "data": data}, response_only=True,
                       status_codes=["200"]),
    ]


# What each signed endpoint does, as the docs page's menu and heading say it (not its operation id).
SUMMARIES = {
    "balance": "Balance of one currency",
    "pay_create": "Create a collection order",
    "pay_query": "Query a collection order",
    "payout_create": "Create a payout",
    "payout_query": "Query a payout",
    "refund_create": "Refund a paid collection order",
    "refund_query": "Query a refund",
    "callbacks_list": "List your callback events",
    "callbacks_resend": "Re-send one callback event",
    "statement": "Signed statement of one day",
}


def signed_request_schema(name: str, request_serializer, data_serializer, *, example_request: dict,
                          example_data: dict) -> dict:
    """extend_schema kwargs: the business fields plus the common signed fields, the enveloped response, and one
    worked example (the request's business fields and the success `data`)."""
    component = name.title().replace("_", "")
    request = type(f"{component}SignedRequest", (request_serializer,), _common_fields())
    response = inline_serializer(
        name=f"{component}Envelope",
        fields={"code": serializers.CharField(help_text="\"0\" on success."),
                "msg": serializers.CharField(help_text="\"OK\" on success."), "data": data_serializer()},
    )
    statuses = sorted({e.http_status for e in ErrorCode if e.http_status != 200})
    return {
        "operation_id": name,
        "summary": SUMMARIES.get(name, name),
        "description": SIGNED_FIELDS_DESCRIPTION,
        "request": {"application/json": request},
        "responses": {200: response,
                      **{status: OpenApiResponse(ErrorEnvelopeSerializer, description=_codes_for(status))
                         for status in statuses}},
        "examples": [*endpoint_examples(example_request, example_data),
                     OpenApiExample("error", value={"code": "1101", "msg": "sign does not verify with the merchant's key.",
                                                      "data": None}, response_only=True, status_codes=["401"])],
    }


# --- the introduction of the docs page (info.description, Markdown) -------------------------------------------

def error_table_markdown() -> str:
    """The error table (docs/api.md, "Error codes") as Markdown, from the one table in apps/common/errors.py."""
    rows = ["| code | HTTP | meaning |", "|---|---|---|"]
    rows += [f"| `{e.code}` | {e.http_status} | {e.default_message} |" for e in ErrorCode]
    return "\n".join(rows)


def api_description() -> str:
    body = {**EXAMPLE_BALANCE_BUSINESS, **EXAMPLE_COMMON_FIELDS}
    return f"""Signed (RSA2) merchant API of the payment platform. Every endpoint below is `POST` with a JSON object body
under `/openapi/v1/`, except the public `GET /currencies`. Every answer, errors included, is the envelope
`{{"code", "msg", "data"}}`: `code` is `"0"` and `msg` `"OK"` on success; on error `data` is `null` and `msg`
names the offending field where there is one. Signing client in Python, field formats and the order of the
checks: `docs/api.md` in the repository.

# Signing

Besides its business fields, every request body carries `merchant_no`, `app_id`, `key_version` (integer),
`timestamp` (Unix seconds, within 300 s of server time), `nonce` (8-64 of `A-Za-z0-9_-`, single use per
merchant for 600 s), `sign_type` = `RSA2` and `sign`.

**The string to sign:**

1. Take every top-level field of the JSON body except `sign`.
2. Drop fields whose value is `null` or the empty string `""`.
3. Sort by key in byte order (ASCII; upper case before lower case).
4. Render values: strings as they are (no escaping, no URL-encoding), integers in decimal, booleans
   `true` / `false`. A top-level object, array or non-integer number is refused with `1000`.
5. Join the `key=value` pairs with `&` and encode as UTF-8.

**The algorithm:** RSASSA-PKCS1-v1_5 with SHA-256 over those bytes (`RSA2`), standard base64 with padding,
in `sign`. Merchant keys: RSA, at least 2048 bits, PEM `SubjectPublicKeyInfo`.

**Worked example** (a balance request):

```json
{json.dumps(body, indent=2)}
```

String to sign:

```
{signing.string_to_sign(body).decode("utf-8")}
```

With the repository's test key `tests/common/vectors/merchant_rsa2048_private.pem` (never use it for real) the
signature is:

```
{EXAMPLE_BALANCE_SIGNATURE}
```

Callbacks the platform sends are signed by the same rules with the platform's key (`key_version` names it).

# Errors

{error_table_markdown()}
"""


def describe_api(result: dict, generator, request, public) -> dict:
    """drf-spectacular postprocessing hook: the introduction of the docs page (SPECTACULAR_SETTINGS)."""
    result["info"]["description"] = api_description()
    return result
