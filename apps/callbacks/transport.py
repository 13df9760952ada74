"""HTTP POST of one callback attempt (docs/api.md, "Callbacks"): urllib3's connection pools, with the SSRF guard in
front.

- The URL must be http(s), with a host and without credentials.
- The host is resolved once, when the request is sent; with CALLBACK_ALLOW_PRIVATE_HOSTS off (production) it is
  refused if ANY address it resolves to is not public. The connection goes to the address that was checked (the
  pool's host is that address): the Host header, TLS SNI and the certificate check keep the hostname, so DNS
  rebinding between check and connect cannot reach an internal address.
- No redirects are followed, no proxy and no .netrc is read from the environment: urllib3's pools do neither.
- Connections are kept alive and reused: one pool per (scheme, hostname, port, checked address) per worker process,
  the least recently used closed beyond POOLS_KEPT. Every attempt resolves and checks the host again, so a changed
  DNS answer gets a pool (and a connection) of its own, a host now resolving to a non-public address is refused
  before any pooled connection is looked at, and two hostnames on one address never share a connection. A reply
  longer than MAX_REPLY_BYTES, or cut, closes its connection instead of returning it. A kept connection the
  merchant's server closed is noticed by urllib3 when it is taken from its pool (and a new one opened).
- CALLBACK_TIMEOUT_SECONDS bounds the whole attempt (_Watchdog), on a new or a reused connection; the reply is read
  up to MAX_REPLY_BYTES.
- Every error is a sentence an operator can act on (it is stored on the attempt and shown in the admin).

Not requests' HTTPAdapter with a pinning override: requests' request preparation, cookie jar, hooks and Response
were most of the POST's CPU in a worker (docs/performance.md, "Measured changes").
"""

import ipaddress
import json
import os
import re
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import Message
from urllib.parse import urlsplit

import requests.adapters
from django.conf import settings
from urllib3 import Timeout
from urllib3._collections import RecentlyUsedContainer
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import (ConnectTimeoutError, HTTPError, NewConnectionError, ProtocolError, SSLError,
                                TimeoutError)

# Enough to see "success" and to keep an excerpt; a larger reply is not "success" anyway.
MAX_REPLY_BYTES = 8192
# Kept connections per worker process: pools for this many (hostname, address) pairs, the least recently used closed
# beyond; in each, up to a worker's attempts in flight (16 threads × a batch of 4) idle connections. Bounded: file
# descriptors.
POOLS_KEPT = 32
CONNECTIONS_PER_POOL = 64
HEADERS = {"Content-Type": "application/json; charset=utf-8", "User-Agent": "payments-callback/1",
           "Accept": "*/*"}


class AttemptRefused(Exception):
    """The attempt cannot go ahead (bad URL, unresolvable or non-public host); the message says why."""


@dataclass(frozen=True)
class PostResult:
    http_status: int | None
    reply: str  # the reply's first CALLBACK_REPLY_EXCERPT_CHARS characters
    error: str  # empty on success
    duration_ms: int

    @property
    def success(self) -> bool:
        return not self.error


# ------------------------------------------------------------------------------------------ the guard

def check_url(url: str) -> None:
    """Static part of the guard: a non-empty http(s) URL with a host and no credentials."""
    if not url:
        raise AttemptRefused("no callback URL configured")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AttemptRefused(f"callback URL must be http(s) with a host; refused {parts.scheme or 'no'} scheme")
    if parts.username or parts.password:
        raise AttemptRefused("callback URL must not carry credentials; refused")


def resolve(host: str, port: int) -> list[tuple]:
    """getaddrinfo for TCP; a seam for tests that need a hostname to resolve somewhere in particular."""
    return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)


# IPv6 forms that carry an IPv4 address in their last 32 bits (docs/callbacks.md, "Which hosts are refused"): the
# packet reaches that IPv4 host through a translator or a tunnel, so it is judged as that host.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052's well-known prefix
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")  # RFC 8215: a site's own translators, never public
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")  # RFC 4291, deprecated
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")  # RFC 2765 (SIIT)
_ISATAP_IDS = (b"\x00\x00\x5e\xfe", b"\x02\x00\x5e\xfe")  # RFC 5214: any /64, then 0:5efe or 200:5efe
# IANA's special-purpose ranges that no callback receiver lives in, named here because the `ipaddress` tables of the
# Python in use lag the registry (3.11 takes 192.0.0.8 and fec0::1 for global addresses).
_SPECIAL_PURPOSE = tuple(ipaddress.ip_network(network) for network in (
    "0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "198.18.0.0/15",
    "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "255.255.255.255/32",
    "100::/64", "2001::/23", "2001:db8::/32", "3fff::/20", "5f00::/16", "fc00::/7", "fe80::/10", "fec0::/10"))
_FLAGS = ("is_unspecified", "is_loopback", "is_link_local", "is_multicast", "is_reserved", "is_private",
          "is_site_local")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address wraps, each with the form's name; [] for a native IPv6 address."""
    last32 = ipaddress.IPv4Address(ip.packed[12:])
    found = []
    if ip.ipv4_mapped is not None:
        found.append(("IPv4-mapped", ip.ipv4_mapped))
    if ip.sixtofour is not None:
        found.append(("6to4", ip.sixtofour))
    if ip.teredo is not None:  # (server, client); the client's address comes out of its obfuscation (XOR)
        found += [("Teredo server", ip.teredo[0]), ("Teredo client", ip.teredo[1])]
    if ip in _NAT64:
        found.append(("NAT64", last32))
    if ip in _IPV4_TRANSLATED:
        found.append(("IPv4-translated", last32))
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:  # not :: (unspecified) nor ::1 (loopback): judged as themselves
        found.append(("IPv4-compatible", last32))
    if ip.packed[8:12] in _ISATAP_IDS:
        found.append(("ISATAP", last32))
    return found


def _flag_refusal(ip) -> str | None:
    for flag in _FLAGS:
        if getattr(ip, flag, False):
            return flag.removeprefix("is_").replace("_", "-")
    if not ip.is_global:  # e.g. 100.64.0.0/10 shared address space
        return "not-global"
    if any(ip in network for network in _SPECIAL_PURPOSE if network.version == ip.version):
        return "special-purpose"
    return None


def address_refusal(address: str) -> str | None:
    """Why an address may not be called back, or None when it is a public unicast address. An IPv6 address that
    wraps an IPv4 one (mapped, 6to4, Teredo, NAT64, ISATAP...) is refused when the wrapped address would be."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return _flag_refusal(ip.ipv4_mapped)
        if ip in _NAT64_LOCAL:
            return "local-nat64"
        for form, wrapped in _embedded_ipv4(ip):
            reason = _flag_refusal(wrapped)
            if reason:
                return f"{form} {wrapped}: {reason}"
    return _flag_refusal(ip)


def checked_address(host: str, port: int) -> str:
    """The address to connect to: the host's first address, once every address it resolves to passed the guard."""
    try:
        infos = resolve(host, port)
    except socket.gaierror as exc:
        raise AttemptRefused(f"callback host {host} could not be resolved ({exc.strerror or exc})") from exc
    if not infos:
        raise AttemptRefused(f"callback host {host} has no address")
    if not settings.CALLBACK_ALLOW_PRIVATE_HOSTS:
        for *_, sockaddr in infos:
            reason = address_refusal(sockaddr[0])
            if reason:
                raise AttemptRefused(f"callback host {host} resolves to a non-public address {sockaddr[0]} "
                                     f"({reason}); refused")
    return infos[0][4][0]


# --------------------------------------------------------------------------------------- the deadline

class _Attempt:
    __slots__ = ("deadline", "sockets", "watched", "expired")

    def __init__(self, deadline: float):
        self.deadline = deadline
        self.sockets: list[socket.socket] = []  # duplicates of the attempt's sockets, ours to shut down and close
        self.watched: set[int] = set()  # file descriptors of the sockets duplicated (open for the whole attempt)
        self.expired = False


class _Watchdog:
    """One thread per process shuts down the sockets of every attempt that outlives its deadline. Socket timeouts
    bound each read, not the attempt: a reply dripped a byte at a time would hold a worker for hours."""

    def __init__(self):
        self._cond = threading.Condition()
        self._attempts: set[_Attempt] = set()
        self._thread: threading.Thread | None = None
        self._current = threading.local()

    @contextmanager
    def attempt(self, seconds: float):
        attempt = _Attempt(time.monotonic() + seconds)
        with self._cond:
            self._attempts.add(attempt)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="callback-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify()
        self._current.attempt = attempt
        try:
            yield attempt
        finally:
            self._current.attempt = None
            with self._cond:
                self._attempts.discard(attempt)
            for sock in attempt.sockets:
                sock.close()

    def watch(self, sock: socket.socket) -> None:
        """Put a socket this thread's attempt just opened, or took from a pool, under the attempt's deadline."""
        attempt = getattr(self._current, "attempt", None)
        if attempt is None or sock.fileno() in attempt.watched:
            return
        attempt.watched.add(sock.fileno())
        # A duplicate of the file descriptor (of a TLS socket too): TLS takes the original socket object over (and
        # closes it), a pooled connection outlives the attempt, and a closed duplicate can never name another
        # connection's file descriptor; shutting it down ends the connection behind both.
        shadow = socket.fromfd(sock.fileno(), sock.family, sock.type)
        with self._cond:
            attempt.sockets.append(shadow)
            if attempt.expired:
                _shut(shadow)

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for attempt in [a for a in self._attempts if a.deadline <= now]:
                    self._attempts.discard(attempt)
                    attempt.expired = True
                    for sock in attempt.sockets:
                        _shut(sock)
                nearest = min((a.deadline for a in self._attempts), default=None)
                self._cond.wait(None if nearest is None else nearest - now)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by the attempt


_watchdog = _Watchdog()
os.register_at_fork(after_in_child=lambda: globals().update(_watchdog=_Watchdog()))  # no thread survives a fork


class _Watched:
    """A connection whose socket is under the deadline of the attempt using it: from its creation (connect and TLS
    handshake included), and again each time an attempt reuses it."""

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _watchdog.watch(sock)
        return sock

    def request(self, *args, **kwargs):
        if self.sock is not None:  # a kept connection taken from the pool
            _watchdog.watch(self.sock)
        return super().request(*args, **kwargs)


class _WatchedHTTPConnection(_Watched, HTTPConnection):
    pass


class _WatchedHTTPSConnection(_Watched, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


# ------------------------------------------------------------------------------------------- the POST

_pools = RecentlyUsedContainer(POOLS_KEPT, dispose_func=lambda pool: pool.close())
_pools_lock = threading.Lock()


def _pool(scheme: str, hostname: str, port: int) -> HTTPConnectionPool:
    """The worker process's pool for this hostname at the address it resolves to now (checked_address: refused
    before any kept connection is looked at). Thread-safe, as urllib3's pools are."""
    address = checked_address(hostname, port)
    key = (scheme, hostname, port, address)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            host = f"[{address}]" if ":" in address else address
            if scheme == "https":
                # SNI and the certificate check on the hostname; the trust store is requests' CA bundle (certifi's),
                # as when requests sent these.
                pool = _HTTPSPool(host, port, maxsize=CONNECTIONS_PER_POOL, server_hostname=hostname,
                                  assert_hostname=hostname, cert_reqs="CERT_REQUIRED",
                                  ca_certs=requests.adapters.DEFAULT_CA_BUNDLE_PATH)
            else:
                pool = _HTTPPool(host, port, maxsize=CONNECTIONS_PER_POOL)
            _pools[key] = pool
    return pool


def close_connections() -> None:
    """Close every kept connection (tests; a process that stops delivering)."""
    with _pools_lock:
        _pools.clear()  # each pool closed by dispose_func


def _forget_pools() -> None:
    global _pools, _pools_lock
    _pools, _pools_lock = RecentlyUsedContainer(POOLS_KEPT, dispose_func=lambda pool: pool.close()), threading.Lock()


# A forked child (a prefork pool) must not share its parent's sockets: it opens its own.
os.register_at_fork(after_in_child=_forget_pools)


def post_callback(url: str, body: dict) -> PostResult:
    """POST body as JSON; never follows redirects; settings.CALLBACK_TIMEOUT_SECONDS bounds the whole attempt.
    Never raises for anything the merchant's side does: the outcome is in the result."""
    timeout = settings.CALLBACK_TIMEOUT_SECONDS
    started = time.monotonic()
    status, reply, error = None, "", ""
    with _watchdog.attempt(timeout) as attempt:
        try:
            status, reply, error = _post(url, body, timeout)
        except (AttemptRefused, HTTPError, OSError) as exc:
            error = _describe(exc, timeout)
    if attempt.expired and error and not error.startswith("timeout"):  # cut by the watchdog: say why
        error = _late(timeout)
    return PostResult(status, reply[: settings.CALLBACK_REPLY_EXCERPT_CHARS], error,
                      int((time.monotonic() - started) * 1000))


def _post(url: str, body: dict, timeout: float) -> tuple[int | None, str, str]:
    check_url(url)
    parts = urlsplit(url)
    hostname = parts.hostname
    try:
        port = parts.port
    except ValueError as exc:
        raise AttemptRefused(f"callback URL has an invalid port ({exc}); refused") from exc
    pool = _pool(parts.scheme, hostname, port or (443 if parts.scheme == "https" else 80))
    # The Host header names the merchant's host as its URL does, whatever address the pool connects to.
    headers = {**HEADERS, "Host": (f"[{hostname}]" if ":" in hostname else hostname) + (f":{port}" if port else "")}
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    response = pool.urlopen("POST", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), body=data,
                            headers=headers, retries=False, redirect=False, assert_same_host=False,
                            timeout=Timeout(connect=timeout, read=timeout), preload_content=False)
    try:
        raw = response.read(MAX_REPLY_BYTES, decode_content=True) or b""
    except Exception:  # noqa: BLE001 - a reply cut off or stalled mid-body is a failed attempt
        return response.status, "", f"HTTP {response.status}, but reading the reply failed"
    finally:
        # A reply read to its end has already gone back to its pool (urllib3 releases it); one left unread (longer
        # than MAX_REPLY_BYTES, or cut) closes its connection here, and the closed connection goes back to free its
        # place in the pool.
        response.close()
        response.release_conn()
    reply = decode_reply(raw, response.headers.get("Content-Type"))
    status = response.status
    if 300 <= status < 400:
        return status, reply, f"redirect to {response.headers.get('Location', '?')!r} not followed"
    if status != 200:
        return status, reply, f"HTTP {status}"
    if reply.strip() != "success":  # exactly `success` once surrounding whitespace is stripped (docs/api.md)
        return status, reply, "reply is not 'success'"
    return status, reply, ""


def decode_reply(raw: bytes, content_type: str | None) -> str:
    """The reply as text, in the charset it declares; UTF-8 when it declares none, or one Python cannot decode
    text with (`charset=bogus`, `charset=base64`), with undecodable bytes replaced."""
    message = Message()
    if content_type:
        message["Content-Type"] = content_type
    charset = message.get_content_charset() or "utf-8"
    try:
        return raw.decode(charset, errors="replace")
    except Exception:  # noqa: BLE001 - LookupError for unknown or non-text codecs; some codecs refuse `replace`
        return raw.decode("utf-8", errors="replace")


def _describe(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, AttemptRefused):
        return str(exc)
    if isinstance(exc, NewConnectionError):  # a ConnectTimeoutError to urllib3, but refused or unreachable
        return f"connection failed: {_cause(exc)}"
    if isinstance(exc, ConnectTimeoutError):
        return f"timeout after {timeout:g} s: no connection"
    if isinstance(exc, TimeoutError):
        return _late(timeout)
    if isinstance(exc, SSLError):
        return f"TLS handshake failed: {_cause(exc)}"
    if isinstance(exc, (ProtocolError, OSError)):
        return f"connection failed: {_cause(exc)}"
    return f"the request could not be sent: {_cause(exc)}"


def _late(timeout: float) -> str:
    return f"timeout after {timeout:g} s: the reply did not complete in time"


def _cause(exc: BaseException) -> str:
    """The innermost cause in its own words (`Connection refused`), without the wrappers' names and addresses."""
    for _ in range(10):  # urllib3's error wraps the socket's or the TLS library's
        reason = getattr(exc, "reason", None)  # urllib3's MaxRetryError
        inner = reason if isinstance(reason, BaseException) else (
            exc.__cause__ or next((a for a in reversed(exc.args) if isinstance(a, BaseException)), None))
        if inner is None:
            break
        exc = inner
    text = (exc.strerror if isinstance(exc, OSError) and isinstance(exc.strerror, str) else None) or str(exc)
    text = re.sub(r"^\[SSL: [A-Z_]+\] | \(_ssl\.c:\d+\)$", "", text)  # OpenSSL's code and source line
    return _human(text)[:300] or "unknown error"


def _human(text: str) -> str:
    """No internal names for people: '<…_PinnedHTTPPool object at 0x…>: Failed to establish a new connection:
    [Errno 111] Connection refused' → 'connection refused'; 'timed out' stays 'timed out'."""
    text = re.sub(r"<[^<>]*\bobject at 0x[0-9a-f]+>:?\s*", "", text)  # urllib3's pool/connection objects
    text = re.sub(r"\b_?\w*(?:Pool|Connection)\(host=[^()]*\):\s*", "", text)  # a pool's str: _HTTPPool(host=…, port=…)
    text = re.sub(r"^\w+(?:Error|Exception)\(\s*|\)$", "", text)  # a wrapper's repr
    errno = re.search(r"\[Errno -?\d+\]\s*(.+)$", text)
    if errno:
        text = errno.group(1)
    text = re.sub(r"^Failed to establish a new connection:\s*", "", text).strip(" '\"")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text
