"""Test-side merchant client: signs requests exactly as a merchant's integration would (docs/api.md, "Signing")."""

import json
import os
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import rsa

from apps.common import signing


@dataclass
class MerchantCtx:
    merchant_no: str
    app_id: str
    key_version: int
    private_key: rsa.RSAPrivateKey
    merchant: object = None
    extra: dict = field(default_factory=dict)

    def signed_body(self, business: dict, **overrides) -> dict:
        body = {
            **business,
            "merchant_no": self.merchant_no,
            "app_id": self.app_id,
            "key_version": self.key_version,
            "timestamp": int(time.time()),
            "nonce": secrets.token_hex(16),
            "sign_type": "RSA2",
        }
        body.update(overrides)
        body["sign"] = signing.sign(self.private_key, body)
        return body


def post_json(client, path: str, body) -> tuple[int, dict]:
    raw = body if isinstance(body, (bytes, str)) else json.dumps(body)
    response = client.post(path, data=raw, content_type="application/json")
    return response.status_code, response.json()


def signed_post(client, ctx: MerchantCtx, path: str, business: dict | None = None, **overrides) -> tuple[int, dict]:
    return post_json(client, path, ctx.signed_body(business or {}, **overrides))


def assert_error(status_and_body: tuple[int, dict], code: str, http_status: int) -> dict:
    """The error envelope of docs/api.md, "Error codes": that code and HTTP status, a message, data null."""
    status, body = status_and_body
    assert (status, body["code"]) == (http_status, code), body
    assert set(body) == {"code", "msg", "data"}
    assert body["data"] is None
    assert isinstance(body["msg"], str) and body["msg"]
    return body


def assert_ok(status_and_body: tuple[int, dict]) -> dict:
    """A success envelope; returns its data."""
    status, body = status_and_body
    assert (status, body["code"], body["msg"]) == (200, "0", "OK"), body
    return body["data"]


def at_once(fn, count: int, timeout: float = 60) -> list[tuple[object, BaseException | None]]:
    """Call fn(i) from `count` threads released together by a barrier, each on its own DB connection (closed at
    the end). Returns (result, exception) per thread, in thread order. For django_db(transaction=True) tests."""
    import threading

    from django.db import connections

    barrier = threading.Barrier(count)
    outcomes: list = [None] * count

    def worker(index: int) -> None:
        try:
            barrier.wait(timeout=timeout)
            outcomes[index] = (fn(index), None)
        except Exception as exc:  # noqa: BLE001 - returned to the test, which asserts on it
            outcomes[index] = (None, exc)
        finally:
            connections.close_all()  # this thread's own connections

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert all(outcome is not None for outcome in outcomes), "a thread did not finish"
    return outcomes


def signed_posts_at_once(ctx: MerchantCtx, path: str, params_per_thread: list[dict],
                         timeout: float = 120) -> list[tuple[int, dict]]:
    """One signed POST per params, all at once from their own threads (signed before the barrier, so the race is
    on the server's writes, not on RSA)."""
    from django.test import Client

    bodies = [json.dumps(ctx.signed_body(params)) for params in params_per_thread]

    def post(index: int) -> tuple[int, dict]:
        response = Client().post(path, data=bodies[index], content_type="application/json")
        return response.status_code, response.json()

    outcomes = at_once(post, len(bodies), timeout)
    assert all(exc is None for _, exc in outcomes), [exc for _, exc in outcomes if exc]
    return [result for result, _ in outcomes]


def screenshot(page, name: str, *, full_page: bool = True) -> Path:
    """A PNG of what a browser test checks, at the page's CSS width, in $SCREENSHOT_DIR or var/screenshots/
    (git-ignored), for a person to look at: the tests assert the page's text, not how it looks. `full_page=False`:
    the visible window only (a page tens of thousands of pixels tall)."""
    from django.conf import settings

    directory = Path(os.environ.get("SCREENSHOT_DIR") or Path(settings.BASE_DIR) / "var" / "screenshots")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page, scale="css", animations="disabled")
    return path


# --- /metrics --------------------------------------------------------------------------------------------------

def scrape(client, **extra) -> str:
    """GET /metrics as the test client (127.0.0.1, an allowed network); its text."""
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def value(text: str, name: str, **labels) -> float:
    """The sample `name{labels}` (labels in any order; others allowed), 0 when absent."""
    for line in text.splitlines():
        match = re.fullmatch(r"([a-zA-Z_:]+)(?:\{(.*)\})? (\S+)", line)
        if not match or match.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(match.group(3))
    return 0.0
