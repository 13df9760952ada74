"""What a merchant's integration does with a callback, written from docs/api.md, "Signing", alone (no project code):
fetch the platform public keys per version (the `platform_keys` command publishes them), rebuild the string
to sign, verify RSASSA-PKCS1-v1_5 / SHA-256."""

import base64
import io
import json

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding
from django.core.management import call_command


def published_platform_keys() -> dict[int, str]:
    out = io.StringIO()
    call_command("platform_keys", stdout=out)
    return {item["key_version"]: item["public_key"] for item in json.loads(out.getvalue())["keys"]}


def merchant_string_to_sign(body: dict) -> bytes:
    pairs = []
    for key in sorted(body, key=lambda k: k.encode("utf-8")):
        value = body[key]
        if key == "sign" or value is None or value == "":
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            text = str(value)
        elif isinstance(value, str):
            text = value
        else:
            raise AssertionError(f"callback field {key} is not a flat value: {value!r}")
        pairs.append(f"{key}={text}")
    return "&".join(pairs).encode("utf-8")


def merchant_verifies(body: dict, public_pem: str | None = None) -> bool:
    """True when the callback's signature verifies with the platform public key of its key_version."""
    if body.get("sign_type") != "RSA2" or not isinstance(body.get("key_version"), int):
        return False
    pem = public_pem or published_platform_keys().get(body["key_version"])
    if pem is None:
        return False
    key = serialization.load_pem_public_key(pem.encode("ascii"))
    try:
        key.verify(base64.b64decode(body["sign"], validate=True), merchant_string_to_sign(body),
                   padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        return False
    return True
