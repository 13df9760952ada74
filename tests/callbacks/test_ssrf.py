"""SSRF guard (docs/api.md, "Callbacks"): http(s) only; in production no host resolving to a non-public address; the
socket connects to the address that was checked (DNS rebinding), with the hostname kept for Host/SNI."""

import socket
from datetime import timedelta

import pytest
from django.test import override_settings

from apps.callbacks import transport
from apps.callbacks.deliver import callback_deliver
from apps.callbacks.models import CallbackEvent
from apps.callbacks.transport import address_refusal
from tests.callbacks.conftest import self_signed_certificate

production_guard = override_settings(CALLBACK_ALLOW_PRIVATE_HOSTS=False)


def _addrinfo(*addresses):
    return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, 0)) for a in addresses]


@pytest.mark.parametrize("address,reason", [
    ("127.0.0.1", "loopback"), ("::1", "loopback"), ("10.1.2.3", "private"), ("172.16.0.1", "private"),
    ("192.168.1.1", "private"), ("169.254.169.254", "link-local"), ("fe80::1", "link-local"),
    ("0.0.0.0", "unspecified"), ("224.0.0.1", "multicast"), ("240.0.0.1", "reserved"),
    ("100.64.0.1", "not-global"), ("::ffff:127.0.0.1", "loopback"), ("fd00::1", "private"),
])
def test_non_public_addresses_are_refused(address, reason):
    assert address_refusal(address) == reason


@pytest.mark.parametrize("address,reason", [
    # 6to4 (2002::/16): the IPv4 address in bits 16-47.
    ("2002:7f00:1::", "6to4 127.0.0.1: loopback"), ("2002:a9fe:a9fe::", "6to4 169.254.169.254: link-local"),
    ("2002:a00:1::1", "6to4 10.0.0.1: private"), ("2002:c0a8:101::", "6to4 192.168.1.1: private"),
    # NAT64: the well-known prefix with the IPv4 address in the last 32 bits; a site's own prefix entirely.
    ("64:ff9b::7f00:1", "NAT64 127.0.0.1: loopback"), ("64:ff9b::a9fe:a9fe", "NAT64 169.254.169.254: link-local"),
    ("64:ff9b:1::7f00:1", "local-nat64"), ("64:ff9b:1:ffff::808:808", "local-nat64"),
    # IPv4-mapped, IPv4-translated (SIIT) and the deprecated IPv4-compatible form.
    ("::ffff:169.254.169.254", "link-local"), ("::ffff:0:7f00:1", "IPv4-translated 127.0.0.1: loopback"),
    ("::7f00:1", "IPv4-compatible 127.0.0.1: loopback"), ("::a9fe:a9fe", "IPv4-compatible 169.254.169.254: link-local"),
    # Teredo (2001::/32): the server in bits 32-63, the client obfuscated (XOR) in the last 32 bits.
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo client 127.0.0.1: loopback"),
    ("2001:0:7f00:1:8000:63bf:3f57:fefe", "Teredo server 127.0.0.1: loopback"),
    ("2001:0:4136:e378:8000:63bf:5601:5601", "Teredo client 169.254.169.254: link-local"),
    # ISATAP: any /64, then 0:5efe or 200:5efe and the IPv4 address.
    ("2001:4860:1::5efe:7f00:1", "ISATAP 127.0.0.1: loopback"),
    ("2606:4700::200:5efe:a9fe:a9fe", "ISATAP 169.254.169.254: link-local"),
    # Special-purpose ranges the Python tables miss or call global.
    ("fec0::1", "site-local"), ("192.0.0.8", "special-purpose"), ("3fff::1", "special-purpose"),
    ("192.88.99.1", "special-purpose"), ("2001:db8::1", "private"),
])
def test_ipv6_forms_wrapping_a_forbidden_ipv4_and_special_ranges_are_refused(address, reason):
    assert address_refusal(address) == reason


@pytest.mark.parametrize("address", ["8.8.8.8", "93.184.216.34", "2606:4700:4700::1111",
                                     "2002:808:808::", "2001:4860:4860::8888", "2a00:1450:4001:82b::200e"])
def test_public_addresses_are_allowed(address):
    assert address_refusal(address) is None


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_loopback_callback_url_is_refused_in_production_and_follows_the_schedule(
        hooked_merchant, callback_receiver, enqueue, clock, host):
    hooked_merchant.collection_callback_url = callback_receiver.url.replace("127.0.0.1", host)
    hooked_merchant.save()
    with production_guard:
        event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    attempt = event.attempts.get()
    assert callback_receiver.requests == []
    assert "non-public address" in attempt.error and "refused" in attempt.error
    assert not attempt.success and attempt.http_status is None
    assert event.status == CallbackEvent.Status.PENDING
    assert event.next_attempt_at == clock.now + timedelta(seconds=15)


def test_the_same_url_is_allowed_under_test_settings(hooked_merchant, callback_receiver, enqueue, settings):
    assert settings.CALLBACK_ALLOW_PRIVATE_HOSTS is True
    event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    assert event.status == CallbackEvent.Status.DELIVERED and len(callback_receiver.requests) == 1


def test_a_host_with_any_private_address_is_refused(hooked_merchant, callback_receiver, enqueue, monkeypatch):
    monkeypatch.setattr(transport, "resolve", lambda host, port: _addrinfo("93.184.216.34", "10.0.0.5"))
    hooked_merchant.collection_callback_url = "http://merchant.invalid/callback"
    hooked_merchant.save()
    with production_guard:
        event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    assert "10.0.0.5" in event.attempts.get().error


@pytest.mark.parametrize("url,error", [
    ("ftp://127.0.0.1:{port}/callback", "callback URL must be http(s) with a host; refused ftp scheme"),
    ("file:///etc/passwd", "callback URL must be http(s) with a host; refused file scheme"),
    ("gopher://127.0.0.1:{port}/callback", "callback URL must be http(s) with a host; refused gopher scheme"),
    ("http:///callback", "callback URL must be http(s) with a host; refused http scheme"),
    ("http://user:pw@127.0.0.1:{port}/callback", "callback URL must not carry credentials; refused"),
])
def test_only_plain_http_s_urls_are_called_even_where_private_hosts_are_allowed(hooked_merchant, callback_receiver,
                                                                                enqueue, url, error):
    # The URL rules come before CALLBACK_ALLOW_PRIVATE_HOSTS (on in test settings): each of these URLs points at the
    # live receiver, so a guard that let one through would deliver it there.
    port = callback_receiver.server.server_address[1]
    hooked_merchant.collection_callback_url = url.format(port=port)
    hooked_merchant.save()
    event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    attempt = event.attempts.get()
    assert (attempt.success, attempt.http_status, attempt.error) == (False, None, error)
    assert callback_receiver.requests == []
    assert event.status == CallbackEvent.Status.PENDING and event.last_error == error


def test_the_socket_connects_to_the_checked_address_with_the_hostname_kept(hooked_merchant, callback_receiver,
                                                                          enqueue, monkeypatch):
    # merchant.invalid resolves nowhere in real DNS: only the checked resolution can have produced the address
    # the request reached, and the Host header still names the merchant's host.
    port = int(callback_receiver.url.split(":")[2].split("/")[0])
    lookups = []

    def resolve(host, port_):
        lookups.append(host)
        return _addrinfo("127.0.0.1")

    monkeypatch.setattr(transport, "resolve", resolve)
    hooked_merchant.collection_callback_url = f"http://merchant.invalid:{port}/callback"
    hooked_merchant.save()
    event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    assert event.status == CallbackEvent.Status.DELIVERED
    assert lookups == ["merchant.invalid"]  # resolved once, at connect time
    assert callback_receiver.requests[0].headers["Host"] == f"merchant.invalid:{port}"


def test_environment_proxies_are_not_used(hooked_merchant, callback_receiver, enqueue, monkeypatch):
    from tests.callbacks.conftest import closed_port_url

    proxy = closed_port_url().removesuffix("/callback")
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    assert event.status == CallbackEvent.Status.DELIVERED


def test_https_keeps_sni_and_certificate_verification_on_the_hostname(hooked_merchant, enqueue, monkeypatch,
                                                                        tmp_path):
    import ssl
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    cert, key = self_signed_certificate(tmp_path, "merchant.invalid")
    server_names = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, ctx: server_names.append(name)
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setattr(transport, "resolve", lambda host, port: _addrinfo("127.0.0.1"))
        hooked_merchant.collection_callback_url = f"https://merchant.invalid:{server.server_address[1]}/callback"
        hooked_merchant.save()
        event = callback_deliver(event_id=enqueue(hooked_merchant).pk)
    finally:
        server.shutdown()
        server.server_close()
    error = event.attempts.get().error
    # The certificate is self-signed: verification is on, so the attempt fails; SNI named the merchant's host.
    assert event.status == CallbackEvent.Status.PENDING
    assert error == "TLS handshake failed: certificate verify failed: self-signed certificate"
    assert server_names == ["merchant.invalid"]
