"""OpenAPI description of the signed endpoints: the common signed fields and the error envelope."""

from drf_spectacular.utils import OpenApiExample, inline_serializer
from rest_framework import serializers

from apps.common.errors import ErrorCode

SIGNED_FIELDS_DESCRIPTION = (
    "Every signed request also carries merchant_no, app_id, key_version, timestamp (Unix seconds, ±300 s), "
    "nonce (8-64 of A-Za-z0-9_-, single use), sign_type=RSA2 and sign (base64 RSASSA-PKCS1-v1_5 SHA-256 over "
    "the sorted key=value string of every non-empty field but sign). Errors: "
    + ", ".join(f"{e.code}/{e.http_status}" for e in ErrorCode if e is not ErrorCode.OK)
    + "."
)


def _common_fields() -> dict:
    return {
        "merchant_no": serializers.CharField(),
        "app_id": serializers.CharField(),
        "key_version": serializers.IntegerField(),
        "timestamp": serializers.IntegerField(),
        "nonce": serializers.RegexField(r"^[A-Za-z0-9_-]{8,64}$"),
        "sign_type": serializers.ChoiceField(choices=["RSA2"]),
        "sign": serializers.CharField(),
    }


def signed_request_schema(name: str, request_serializer, data_serializer) -> dict:
    """extend_schema kwargs: the business fields plus the common signed fields, and the enveloped response."""
    request = type(f"{name.title().replace('_', '')}SignedRequest", (request_serializer,), _common_fields())
    response = inline_serializer(
        name=f"{name.title().replace('_', '')}Envelope",
        fields={"code": serializers.CharField(), "msg": serializers.CharField(), "data": data_serializer()},
    )
    error = inline_serializer(
        name="ErrorEnvelope",
        fields={"code": serializers.CharField(), "msg": serializers.CharField(),
                "data": serializers.JSONField(allow_null=True)},
    )
    statuses = sorted({e.http_status for e in ErrorCode if e.http_status != 200})
    return {
        "operation_id": name,
        "description": SIGNED_FIELDS_DESCRIPTION,
        "request": request,
        "responses": {200: response, **{status: error for status in statuses}},
        "examples": [OpenApiExample("error", value={"code": "1101", "msg": "The signature is missing or invalid.",
                                                      "data": None}, response_only=True, status_codes=["401"])],
    }
