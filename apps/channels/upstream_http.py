"""One HTTP call to an upstream's API, its outcome in the terms of apps.channels.base (docs/channels.md, "Failover"),
shared by the Xendit and PayMongo clients: a connection never made, 401/403 (our key) and 429 are UpstreamDeclined
(definitely not taken); a read timeout, a reset, 5xx, 408 and a body that is not JSON are UpstreamUnavailable
(ambiguous); any other 4xx is UpstreamRejected with the upstream's error code."""

import json
from collections.abc import Callable
from decimal import Decimal

import requests
import urllib3
from django.conf import settings

from apps.channels.base import UpstreamDeclined, UpstreamRejected, UpstreamUnavailable


def upstream_call(*, upstream: str, method: str, base_url: str, path: str, auth: tuple[str, str],
                  data: bytes | None, params: dict | None, headers: dict | None,
                  error_code: Callable[[object], str]):
    """The JSON body (amounts as Decimal) of a 2xx/3xx answer, or the exception its outcome calls for.
    `error_code(body)`: the upstream's error code from an error body."""
    where = f"{upstream} {method} {path}"
    try:
        response = requests.request(
            method, base_url + path, params=params, auth=auth, timeout=settings.CHANNEL_HTTP_TIMEOUT_SECONDS,
            data=data, headers={"Content-Type": "application/json", "Accept": "application/json", **(headers or {})},
            allow_redirects=False)
    except requests.RequestException as exc:
        if _never_sent(exc):  # the connection was never made: nothing reached the upstream
            raise UpstreamDeclined(f"{where}: {type(exc).__name__}") from None
        raise UpstreamUnavailable(f"{where}: {type(exc).__name__}") from None
    if response.status_code in (401, 403, 429):
        # A 401/403 is our configuration (a wrong or revoked key), a 429 a moment's refusal of the request: none
        # refuses the order (retried later, never failed), and the upstream did nothing with it.
        raise UpstreamDeclined(f"{where}: HTTP {response.status_code}")
    if response.status_code >= 500 or response.status_code == 408:
        # Ambiguous: the request may have been processed before the error (or the timeout) was answered.
        raise UpstreamUnavailable(f"{where}: HTTP {response.status_code}")
    try:
        body = json.loads(response.content, parse_float=Decimal) if response.content else {}
    except ValueError:
        raise UpstreamUnavailable(f"{where}: HTTP {response.status_code}, not JSON") from None
    if response.status_code >= 400:
        code = error_code(body)
        raise UpstreamRejected(f"{where}: HTTP {response.status_code} {code}", status=response.status_code,
                               error_code=code)
    return body


def _never_sent(exc: requests.RequestException) -> bool:
    """Whether the request certainly never reached the server: the TCP connection was refused or timed out (urllib3's
    NewConnectionError is a ConnectTimeoutError). A reset or read timeout after sending is not."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return isinstance(exc, requests.ConnectionError) and isinstance(reason, urllib3.exceptions.ConnectTimeoutError)
