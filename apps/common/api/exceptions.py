"""Every failure of the API becomes the envelope with its code and HTTP status (docs/api.md, "Error codes")."""

import logging

from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response

from apps.common.api.envelope import envelope, envelope_response
from apps.common.errors import ApiError, DomainError, ErrorCode

logger = logging.getLogger(__name__)


def _map(exc: Exception) -> tuple[ErrorCode, str | None]:
    if isinstance(exc, (ApiError, DomainError)):
        return exc.error, exc.msg
    if isinstance(exc, drf_exceptions.MethodNotAllowed):
        return ErrorCode.METHOD_NOT_ALLOWED, None
    if isinstance(exc, (Http404, drf_exceptions.NotFound)):
        return ErrorCode.NOT_FOUND_ENDPOINT, None
    if isinstance(exc, drf_exceptions.Throttled):
        return ErrorCode.RATE_LIMITED, None
    if isinstance(exc, (drf_exceptions.ParseError, drf_exceptions.UnsupportedMediaType)):
        return ErrorCode.INVALID_REQUEST, None
    if isinstance(exc, RequestDataTooBig):
        return ErrorCode.INVALID_REQUEST, "The body is too large."
    if isinstance(exc, drf_exceptions.ValidationError):
        return ErrorCode.INVALID_REQUEST, validation_message(exc.detail)
    if isinstance(exc, (drf_exceptions.NotAuthenticated, drf_exceptions.AuthenticationFailed)):
        return ErrorCode.INVALID_SIGNATURE, None
    logger.exception("Unhandled error in API view", exc_info=exc)
    return ErrorCode.INTERNAL_ERROR, None


def validation_message(detail) -> str:
    """First field error as a sentence naming the field: 'amount: A valid integer is required.'"""
    if isinstance(detail, dict):
        for field, errors in detail.items():
            first = errors[0] if isinstance(errors, list) and errors else errors
            if isinstance(first, (dict, list)):
                return validation_message(first)
            name = "request" if field == "non_field_errors" else field
            return f"{name}: {first}"
    if isinstance(detail, list) and detail:
        return validation_message(detail[0])
    return str(detail)


def envelope_exception_handler(exc: Exception, context: dict) -> Response:
    error, msg = _map(exc)
    response = Response(envelope(None, error, msg), status=error.http_status)
    if error is ErrorCode.INTERNAL_ERROR:
        # Logged above with its traceback; django.request's "Internal Server Error: /path" would say it again.
        response._has_been_logged = True
    return response


@csrf_exempt
def api_not_found(request, exception=None):
    return envelope_response(ErrorCode.NOT_FOUND_ENDPOINT)


def api_server_error(request):
    return envelope_response(ErrorCode.INTERNAL_ERROR)
