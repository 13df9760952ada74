"""Test-side merchant client: signs requests exactly as a merchant's integration would (contract §2)."""

import json
import secrets
import time
from dataclasses import dataclass, field

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
    """The error envelope of contract §3: that code and HTTP status, a message, data null."""
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


def signed_posts_at_once(ctx: MerchantCtx, path: str, params_per_thread: list[dict],
                         timeout: float = 120) -> list[tuple[int, dict]]:
    """One signed POST per params from its own thread (own DB connection), released together by a barrier.

    Bodies are signed before the barrier, so the race is on the server's writes, not on RSA. For
    django_db(transaction=True) tests on PostgreSQL.
    """
    import threading

    from django.db import connection
    from django.test import Client

    barrier = threading.Barrier(len(params_per_thread))
    results: list = [None] * len(params_per_thread)

    def worker(index: int, params: dict) -> None:
        try:
            body = json.dumps(ctx.signed_body(params))
            barrier.wait()
            response = Client().post(path, data=body, content_type="application/json")
            results[index] = (response.status_code, response.json())
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i, p)) for i, p in enumerate(params_per_thread)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert all(result is not None for result in results), "a thread did not finish"
    return results
