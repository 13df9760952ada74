"""RSA2 signing of requests and callbacks (the platform's docs/api.md, "Signing"), written here so that the SDK stands
alone.

String to sign: every top-level field except `sign`, minus null and empty-string values, sorted by key in
byte order, rendered `key=value` (strings as they are, integers in decimal, booleans `true`/`false`), joined
with `&`, UTF-8. Signature: RSASSA-PKCS1-v1_5 over SHA-256, standard base64 with padding.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

SIGN_TYPE = "RSA2"

PrivateKeyLike = rsa.RSAPrivateKey | bytes | str
PublicKeyLike = rsa.RSAPublicKey | bytes | str


class UnsignableValue(TypeError):
    """A top-level value the string to sign cannot render: an object, an array or a non-integer number."""


def render_value(value: Any) -> str:
    if isinstance(value, bool):  # before int: bool is a subclass of int
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    raise UnsignableValue(f"{type(value).__name__} cannot be signed: send strings, integers or booleans")


def string_to_sign(body: Mapping[str, Any]) -> bytes:
    """The bytes that are signed for `body` (docs/api.md, "Signing")."""
    pairs = sorted(
        (key.encode("utf-8"), render_value(value))
        for key, value in body.items()
        if key != "sign" and value is not None and value != ""
    )
    return b"&".join(key + b"=" + value.encode("utf-8") for key, value in pairs)


def sign(private_key: rsa.RSAPrivateKey, body: Mapping[str, Any]) -> str:
    """Base64 RSASSA-PKCS1-v1_5 / SHA-256 signature of `body`'s string to sign."""
    signature = private_key.sign(string_to_sign(body), padding.PKCS1v15(), hashes.SHA256())
    return base64.b64encode(signature).decode("ascii")


def verify(public_key: rsa.RSAPublicKey, body: Mapping[str, Any], signature_b64: str) -> bool:
    """True when `signature_b64` is a valid signature of `body` by the holder of `public_key`."""
    try:
        signature = base64.b64decode(signature_b64, validate=True)
    except (binascii.Error, ValueError, TypeError):
        return False
    try:
        public_key.verify(signature, string_to_sign(body), padding.PKCS1v15(), hashes.SHA256())
    except (InvalidSignature, UnsignableValue):
        return False
    return True


def new_nonce() -> str:
    """32 hex characters (128 random bits): within the platform's 8-64 characters of [A-Za-z0-9_-]."""
    return secrets.token_hex(16)


def load_private_key(key: PrivateKeyLike, password: bytes | None = None) -> rsa.RSAPrivateKey:
    """An RSA private key from a key object or its PEM text (PKCS#1 or PKCS#8)."""
    if isinstance(key, rsa.RSAPrivateKey):
        return key
    data = key.encode("ascii") if isinstance(key, str) else key
    loaded = serialization.load_pem_private_key(data, password=password)
    if not isinstance(loaded, rsa.RSAPrivateKey):
        raise ValueError("not an RSA private key")
    return loaded


def load_private_key_file(path: str | Path, password: bytes | None = None) -> rsa.RSAPrivateKey:
    return load_private_key(Path(path).read_bytes(), password)


def load_public_key(key: PublicKeyLike) -> rsa.RSAPublicKey:
    """An RSA public key from a key object or its PEM text (SubjectPublicKeyInfo, as `platform_keys` prints)."""
    if isinstance(key, rsa.RSAPublicKey):
        return key
    data = key.encode("ascii") if isinstance(key, str) else key
    loaded = serialization.load_pem_public_key(data)
    if not isinstance(loaded, rsa.RSAPublicKey):
        raise ValueError("not an RSA public key")
    return loaded
