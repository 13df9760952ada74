"""The response envelope (docs/api.md, "Error codes"): {"code", "msg", "data"}."""

from typing import Any

from django.http import JsonResponse

from apps.common.errors import ErrorCode


def envelope(data: Any = None, error: ErrorCode = ErrorCode.OK, msg: str | None = None) -> dict:
    return {"code": error.code, "msg": msg or error.default_message, "data": data if error is ErrorCode.OK else None}


def envelope_response(error: ErrorCode, msg: str | None = None, data: Any = None) -> JsonResponse:
    """A plain Django response in the envelope, for places DRF does not reach (404/500 handlers)."""
    return JsonResponse(envelope(data, error, msg), status=error.http_status)
