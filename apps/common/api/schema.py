"""OpenAPI description of the signed endpoints: the common signed fields and the error envelope."""

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, inline_serializer
from rest_framework import serializers

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
    """The envelope of every failed request (contract §3)."""

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


def _codes_for(status: int) -> str:
    return "; ".join(f"{e.code}: {e.default_message}" for e in ErrorCode if e.http_status == status)


def signed_request_schema(name: str, request_serializer, data_serializer) -> dict:
    """extend_schema kwargs: the business fields plus the common signed fields, and the enveloped response."""
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
        "description": SIGNED_FIELDS_DESCRIPTION,
        "request": {"application/json": request},
        "responses": {200: response,
                      **{status: OpenApiResponse(ErrorEnvelopeSerializer, description=_codes_for(status))
                         for status in statuses}},
        "examples": [OpenApiExample("error", value={"code": "1101", "msg": "sign does not verify with the merchant's key.",
                                                      "data": None}, response_only=True, status_codes=["401"])],
    }
