"""Structured logs: structlog and stdlib logging through one formatter, with the request id of django-structlog.

Every `logging.getLogger(__name__)` line of the apps goes through structlog's ProcessorFormatter, so it carries the
context bound in contextvars: `request_id` in a request (RequestMiddleware) and in a Celery task queued by that
request (django-structlog's Celery receivers copy it into the task's headers and bind it again in the worker).
"""

import re

import structlog

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{8,128}$")


def _shared_processors() -> list:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]


def formatter(*, json: bool) -> structlog.stdlib.ProcessorFormatter:
    """The `()` factory of LOGGING's formatters: JSON lines, or plain console lines (no colours)."""
    renderer = (structlog.processors.JSONRenderer() if json
                else structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback))
    final = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if json:
        final.append(structlog.processors.format_exc_info)
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=_shared_processors(),
        processors=[*final, renderer],
    )


def configure() -> None:
    """structlog loggers (django-structlog's own) hand their event to stdlib logging, formatted like any line."""
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_shared_processors(),
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


class RequestIdHeader:
    """Drops an incoming X-Request-ID that is not 8-128 characters of [A-Za-z0-9._:-] (so no newline, quote or
    megabyte of text reaches a log line); RequestMiddleware then generates a UUID instead."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        value = request.META.get("HTTP_X_REQUEST_ID")
        if value is not None and not _REQUEST_ID.match(value):
            del request.META["HTTP_X_REQUEST_ID"]
            request.__dict__.pop("headers", None)  # HttpRequest.headers is a cached_property over META
        return self.get_response(request)


class RequestIdEcho:
    """Answers every request with its id in `X-Request-ID` (the caller's, or the generated one), so that a merchant
    can quote it and support finds the request's log lines. Placed after RequestMiddleware, which binds the id, so
    error answers carry it too."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        request_id = structlog.contextvars.get_contextvars().get("request_id")
        if request_id:
            response["X-Request-ID"] = request_id
        return response


configure()
