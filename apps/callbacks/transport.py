"""HTTP POST of one callback body, with the SSRF guard of contract §6.

The guard lives in the connection itself: the host is resolved once when the socket is opened, every
resolved address is checked, and the socket connects to a checked address. The URL, the Host header, TLS
SNI and certificate verification keep the hostname, so DNS rebinding between check and connect cannot
reach an internal address. Environment proxies are ignored (they would bypass the check).
"""

import heapq
import ipaddress
import itertools
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests
from django.conf import settings
from requests.utils import DEFAULT_CA_BUNDLE_PATH, get_encoding_from_headers
from urllib3 import exceptions as urllib3_exceptions
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import (ClosedPoolError, ConnectTimeoutError, LocationValueError, MaxRetryError,
                                NameResolutionError, NewConnectionError, ProtocolError, ReadTimeoutError,
                                ResponseError)
from urllib3.util import Retry, Timeout
from urllib3.util import connection as urllib3_connection

# Enough to see "success" and to keep an excerpt; a larger reply is not "success" anyway.
MAX_REPLY_BYTES = 8192

# Sockets opened by the attempt running in this thread, so its deadline can cut them (see post_callback).
_attempt = threading.local()


class CallbackUrlRefused(Exception):
    """The callback URL may not be called (scheme, or a non-public address in production). Not an OSError on
    purpose: it must pass through urllib3's retry handling untouched."""


@dataclass
class PostResult:
    http_status: int | None
    reply: str
    error: str
    duration_ms: int

    @property
    def success(self) -> bool:
        # Contract §6: HTTP 200 and a body that is exactly `success` once surrounding whitespace is stripped.
        return self.http_status == 200 and not self.error and self.reply.strip() == "success"


def resolve(host: str, port: int) -> list[tuple]:
    """getaddrinfo for TCP; a seam for tests that need a hostname to resolve somewhere in particular."""
    return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)


def address_refusal(address: str) -> str | None:
    """Why an address may not be called back, or None when it is a public unicast address."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for flag in ("is_unspecified", "is_loopback", "is_link_local", "is_multicast", "is_reserved", "is_private"):
        if getattr(ip, flag):
            return flag.removeprefix("is_").replace("_", "-")
    if not ip.is_global:  # e.g. 100.64.0.0/10 shared address space
        return "not-global"
    return None


def checked_addresses(host: str, port: int) -> list[tuple]:
    """Resolve host; refuse if ANY address is non-public (unless settings allow private hosts)."""
    infos = resolve(host, port)
    if not infos:
        raise socket.gaierror(f"{host} has no address")
    if not settings.CALLBACK_ALLOW_PRIVATE_HOSTS:
        for *_, sockaddr in infos:
            reason = address_refusal(sockaddr[0])
            if reason:
                raise CallbackUrlRefused(f"callback host {host} resolves to a non-public address "
                                         f"{sockaddr[0]} ({reason}); refused")
    return infos


class _PinnedConnectionMixin:
    """Open the socket to an address checked by checked_addresses(), never to a second resolution."""

    def _new_conn(self) -> socket.socket:
        try:
            infos = checked_addresses(self._dns_host, self.port)
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc
        last_error: OSError | None = None
        for *_, sockaddr in infos:
            try:
                sock = urllib3_connection.create_connection(
                    (sockaddr[0], self.port), self.timeout, source_address=self.source_address,
                    socket_options=self.socket_options,
                )
                attempt = getattr(_attempt, "current", None)
                if attempt is not None:
                    with attempt.lock:
                        attempt.sockets.append(sock)
                    if attempt.expired:  # opened after the deadline passed: cut it too
                        attempt.cut()
                return sock
            except TimeoutError as exc:
                raise ConnectTimeoutError(self, f"Connection to {self.host} timed out "
                                                f"(connect timeout={self.timeout})") from exc
            except OSError as exc:
                last_error = exc
        raise NewConnectionError(self, f"Failed to establish a new connection: {last_error}")


class _PinnedHTTPConnection(_PinnedConnectionMixin, HTTPConnection):
    pass


class _PinnedHTTPSConnection(_PinnedConnectionMixin, HTTPSConnection):
    pass


class _PinnedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _PinnedHTTPConnection


class _PinnedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _PinnedHTTPSConnection


# What requests' HTTPAdapter(max_retries=0) uses: no retry of any kind, a read error raised as it is.
_NO_RETRIES = Retry(0, read=False)


def _excerpt(text: str) -> str:
    return text[: settings.CALLBACK_REPLY_EXCERPT_CHARS]


def check_url(url: str) -> None:
    """Static part of the guard: a non-empty http(s) URL with a host."""
    if not url:
        raise CallbackUrlRefused("no callback URL configured")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CallbackUrlRefused(f"callback URL must be http(s) with a host; refused {parts.scheme or 'no'} scheme")
    if parts.username or parts.password:
        raise CallbackUrlRefused("callback URL must not carry credentials")


class _Attempt:
    """One attempt's deadline and the sockets it opened, so the watchdog can cut them at the deadline."""

    __slots__ = ("deadline", "sockets", "expired", "finished", "lock")

    def __init__(self, deadline: float):
        self.deadline = deadline
        self.sockets: list[socket.socket] = []
        self.expired = False
        self.finished = False
        self.lock = threading.Lock()

    def cut(self) -> None:
        with self.lock:
            if self.finished:
                return
            self.expired = True
            sockets = list(self.sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def finish(self) -> None:
        with self.lock:
            self.finished = True


class _Watchdog:
    """One thread per process that cuts every attempt at its deadline (a timer thread per attempt cost more than
    the rest of the attempt's own work once a worker delivered dozens per second)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Attempt]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, attempt: _Attempt) -> None:
        with self._cond:
            heapq.heappush(self._heap, (attempt.deadline, next(self._order), attempt))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="callback-watchdog", daemon=True)
                self._thread.start()
            if self._heap[0][2] is attempt:
                self._cond.notify()

    def _run(self) -> None:
        while True:
            due: list[_Attempt] = []
            with self._cond:
                while not due:
                    now = time.monotonic()
                    while self._heap and (self._heap[0][2].finished or self._heap[0][0] <= now):
                        attempt = heapq.heappop(self._heap)[2]
                        if not attempt.finished:
                            due.append(attempt)
                    if not due:
                        self._cond.wait(self._heap[0][0] - now if self._heap else None)
            for attempt in due:
                attempt.cut()


_watchdog = _Watchdog()
os.register_at_fork(after_in_child=lambda: globals().update(_watchdog=_Watchdog()))  # no thread survives a fork


def post_callback(url: str, body: dict) -> PostResult:
    """POST body as JSON; never follows redirects; settings.CALLBACK_TIMEOUT_SECONDS bounds the whole attempt."""
    started = time.monotonic()
    timeout = settings.CALLBACK_TIMEOUT_SECONDS
    # Socket timeouts bound each read, not the attempt: an endpoint dripping its reply a byte at a time would
    # hold the worker for hours. At the deadline the watchdog shuts the attempt's sockets (docs/faults.md, drill 4).
    attempt = _Attempt(started + timeout)

    def done(status=None, reply="", error="") -> PostResult:
        if attempt.expired:
            error = f"timeout after {timeout:g} s: the reply did not complete in time"
        return PostResult(status, _excerpt(reply), error, int((time.monotonic() - started) * 1000))

    _attempt.current = attempt
    _watchdog.watch(attempt)
    try:
        return _post(url, body, timeout, done)
    finally:
        attempt.finish()
        _attempt.current = None


def _send(parsed, path_url: str, data: bytes, timeout: float):
    """urllib3 directly, exactly as requests' HTTPAdapter.send(stream=True, verify=True, proxies={}) with
    max_retries=0 would send it, urllib3 errors mapped to the same requests exceptions; without building a
    PreparedRequest, a PoolManager and a Response per attempt. Returns the pool and the (unread) response."""
    # As PoolManager.connection_from_host: port defaults by scheme; only https gets the TLS settings.
    try:
        scheme, host, port = parsed.scheme.lower(), parsed.hostname, parsed.port
    except ValueError as exc:
        raise requests.exceptions.InvalidURL(exc) from exc
    try:
        if not host:
            raise LocationValueError("No host specified.")
        if scheme == "https":
            # As HTTPAdapter.cert_verify with verify=True: certificate required, certifi's CA bundle.
            if not os.path.exists(DEFAULT_CA_BUNDLE_PATH):
                raise OSError(f"Could not find a suitable TLS CA certificate bundle, invalid path: "
                              f"{DEFAULT_CA_BUNDLE_PATH}")
            pool = _PinnedHTTPSPool(host, port or 443, maxsize=1, block=False, cert_reqs="CERT_REQUIRED",
                                    ca_certs=DEFAULT_CA_BUNDLE_PATH)
        else:
            pool = _PinnedHTTPPool(host, port or 80, maxsize=1, block=False)
    except LocationValueError as exc:
        raise requests.exceptions.InvalidURL(exc) from exc
    headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": "payments-callback/1",
               "Content-Length": str(len(data))}
    try:
        try:
            response = pool.urlopen("POST", path_url, body=data, headers=headers, redirect=False,
                                    assert_same_host=False, preload_content=False, decode_content=False,
                                    retries=_NO_RETRIES, timeout=Timeout(connect=timeout, read=timeout),
                                    chunked=False)
        except (ProtocolError, OSError) as err:
            raise requests.exceptions.ConnectionError(err) from err
        except MaxRetryError as e:
            if isinstance(e.reason, ConnectTimeoutError) and not isinstance(e.reason, NewConnectionError):
                raise requests.exceptions.ConnectTimeout(e) from e
            if isinstance(e.reason, ResponseError):
                raise requests.exceptions.RetryError(e) from e
            if isinstance(e.reason, urllib3_exceptions.ProxyError):
                raise requests.exceptions.ProxyError(e) from e
            if isinstance(e.reason, urllib3_exceptions.SSLError):
                raise requests.exceptions.SSLError(e) from e
            raise requests.exceptions.ConnectionError(e) from e
        except ClosedPoolError as e:
            raise requests.exceptions.ConnectionError(e) from e
        except urllib3_exceptions.ProxyError as e:
            raise requests.exceptions.ProxyError(e) from e
        except (urllib3_exceptions.SSLError, urllib3_exceptions.HTTPError) as e:
            if isinstance(e, urllib3_exceptions.SSLError):
                raise requests.exceptions.SSLError(e) from e
            if isinstance(e, ReadTimeoutError):
                raise requests.exceptions.ReadTimeout(e) from e
            if isinstance(e, urllib3_exceptions.InvalidHeader):
                raise requests.exceptions.InvalidHeader(e) from e
            raise
    except BaseException:
        pool.close()
        raise
    return pool, response


def _post(url: str, body: dict, timeout: float, done) -> PostResult:
    try:
        check_url(url)
    except CallbackUrlRefused as exc:
        return done(error=str(exc))
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    # requests' URL preparation (IDNA host, requoting, its errors), without the rest of a PreparedRequest.
    prepared = requests.PreparedRequest()
    prepared.prepare_url(url, None)
    # No Session and no PoolManager: no redirect handling at all (not even reading a redirect's body), no
    # environment proxies or netrc (a proxy would bypass the address check).
    pool = None
    try:
        try:
            pool, response = _send(urlsplit(prepared.url), prepared.path_url, data, timeout)
        except CallbackUrlRefused as exc:
            return done(error=str(exc))
        except requests.Timeout as exc:
            return done(error=f"timeout after {timeout:g} s: {type(exc).__name__}")
        except requests.RequestException as exc:
            return done(error=f"{type(exc).__name__}: {exc}"[:1000])
        status = response.status
        try:
            raw = response.read(MAX_REPLY_BYTES, decode_content=True) or b""
        except Exception as exc:  # noqa: BLE001 - a reply cut off or stalled mid-body is a failure
            return done(status=status, error=f"reading the reply failed: {type(exc).__name__}")
        finally:
            response.close()
            response.release_conn()
    finally:
        if pool is not None:
            pool.close()
    reply = raw.decode(get_encoding_from_headers(response.headers) or "utf-8", errors="replace")
    error = ""
    if 300 <= status < 400:
        error = f"redirect to {response.headers.get('Location', '?')!r} not followed"
    elif status != 200:
        error = f"HTTP {status}"
    elif reply.strip() != "success":
        error = "reply is not 'success'"
    return done(status=status, reply=reply, error=error)
