"""Structured logs: structlog and stdlib logging through one formatter, with the request id of django-structlog.

Every `logging.getLogger(__name__)` line of the apps goes through structlog's ProcessorFormatter, so it carries the
context bound in contextvars: `request_id` in a request (RequestId, below) and in a Celery task queued by that
request (django-structlog's Celery receivers copy it into the task's headers and bind it again in the worker).
"""

import re
import uuid

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


class RequestId:
    """Each request's `request_id`: the caller's X-Request-ID when it is 8-128 characters of [A-Za-z0-9._:-] (so no
    newline, quote or megabyte of text reaches a log line), else a new UUID. Bound in structlog's contextvars for
    every line logged during the request (and, through django-structlog's Celery receivers, every task it queues),
    and echoed in the answer's `X-Request-ID` (errors too), so that a merchant can quote it and support finds the
    request's lines.

    In place of django-structlog's RequestMiddleware between two middlewares of ours (one dropping a malformed
    header, one echoing the id): its request_started / request_finished lines were off (LOGGING), and building
    them, with the user-id binding and two walks of the whole context, cost every request about 0.2 ms of CPU
    (docs/performance.md, "Measured changes")."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request_id = request.META.get("HTTP_X_REQUEST_ID")
        if request_id is not None and not _REQUEST_ID.match(request_id):
            del request.META["HTTP_X_REQUEST_ID"]
            request.__dict__.pop("headers", None)  # HttpRequest.headers is a cached_property over META
            request_id = None
        if request_id is None:
            request_id = str(uuid.uuid4())
        structlog.contextvars.bind_contextvars(request_id=request_id)
        try:
            response = self.get_response(request)
        finally:
            structlog.contextvars.clear_contextvars()
        response["X-Request-ID"] = request_id
        return response


configure()
