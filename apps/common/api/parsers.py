"""Strict JSON parsing for signed endpoints (docs/api.md, "The string to sign", step 4, and "Error codes", 1000)."""

import json

from rest_framework.parsers import BaseParser

from apps.common.errors import ApiError, ErrorCode


def _reject_float(text: str):
    raise ApiError(ErrorCode.INVALID_REQUEST, f"Non-integer number {text[:32]} is not allowed; amounts are integers.")


def _reject_constant(text: str):
    raise ApiError(ErrorCode.INVALID_REQUEST, f"{text} is not valid JSON.")


def parse_flat_json_object(raw: bytes) -> dict:
    """Parse a body that must be a JSON object whose values are strings, integers, booleans or null."""
    try:
        body = json.loads(raw.decode("utf-8"), parse_float=_reject_float, parse_constant=_reject_constant)
    except ApiError:
        raise
    except (UnicodeDecodeError, ValueError):
        raise ApiError(ErrorCode.INVALID_REQUEST, "The body is not valid UTF-8 JSON.") from None
    except RecursionError:  # json's decoder recurses per nesting level: '[' * 100000 must not be a 500
        raise ApiError(ErrorCode.INVALID_REQUEST, "The body is nested too deeply.") from None
    if not isinstance(body, dict):
        raise ApiError(ErrorCode.INVALID_REQUEST, "The body must be a JSON object.")
    for key, value in body.items():
        # A \ud800 escape decodes to a lone surrogate: not Unicode text, so the string to sign cannot be UTF-8.
        if not _is_unicode_text(key):
            raise ApiError(ErrorCode.INVALID_REQUEST, "A field name is not valid Unicode text.")
        if isinstance(value, (dict, list)):
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Field {_label(key)} must be a string, integer or boolean.")
        if isinstance(value, str) and not _is_unicode_text(value):
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Field {_label(key)} is not valid Unicode text.")
    return body


def _label(key: str, limit: int = 64) -> str:
    """A request's field name as echoed in `msg`: attacker-chosen text, so bounded."""
    return key if len(key) <= limit else key[:limit] + "…"


def _is_unicode_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class FlatJSONParser(BaseParser):
    # Any content type is read as JSON: merchants' clients differ, and the signature is over the fields anyway.
    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return parse_flat_json_object(stream.read() if stream is not None else b"")
