"""RSA2 signing rules (docs/api.md, "Signing"), the one place used by request authentication and callback signing.

String to sign: every top-level field except `sign`, minus null and empty-string values, sorted by key
(byte order), rendered as key=value (strings as is, integers in decimal, booleans true/false), joined
with '&', encoded as UTF-8. Signature: RSASSA-PKCS1-v1_5 over SHA-256, standard base64 with padding.
"""

import base64
import binascii
import secrets
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

SIGN_TYPE = "RSA2"
MIN_KEY_BITS = 2048


class UnsignableValue(ValueError):
    """A top-level value that the string to sign cannot render (object, array, non-integer number)."""


def render_value(value: Any) -> str:
    if isinstance(value, bool):  # before int: bool is a subclass of int
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    raise UnsignableValue(f"{type(value).__name__} cannot be signed")


def is_absent(value: Any) -> bool:
    """Null and the empty string count as absent, in the string to sign and everywhere else (docs/api.md, "Field
    formats")."""
    return value is None or value == ""


def string_to_sign(body: dict[str, Any]) -> bytes:
    pairs = sorted(
        ((key.encode("utf-8"), render_value(value)) for key, value in body.items() if key != "sign" and not is_absent(value)),
        key=lambda pair: pair[0],
    )
    return "&".join(f"{key.decode('utf-8')}={value}" for key, value in pairs).encode("utf-8")


def sign(private_key: rsa.RSAPrivateKey, body: dict[str, Any]) -> str:
    signature = private_key.sign(string_to_sign(body), padding.PKCS1v15(), hashes.SHA256())
    return base64.b64encode(signature).decode("ascii")


def verify(public_key: rsa.RSAPublicKey, body: dict[str, Any], signature_b64: str) -> bool:
    try:
        signature = base64.b64decode(signature_b64, validate=True)
    except (binascii.Error, ValueError):
        return False
    try:
        public_key.verify(signature, string_to_sign(body), padding.PKCS1v15(), hashes.SHA256())
    except (InvalidSignature, UnsignableValue):
        return False
    return True


def new_nonce() -> str:
    return secrets.token_urlsafe(24)


def generate_private_key(bits: int = 2048) -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=bits)


def private_key_to_pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def public_key_to_pem(key: rsa.RSAPublicKey) -> str:
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode("ascii")


def load_private_key(pem: bytes) -> rsa.RSAPrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("not an RSA private key")
    return key


def load_public_key(pem: str | bytes) -> rsa.RSAPublicKey:
    """Load and check a merchant's public key: PEM SubjectPublicKeyInfo, RSA, at least 2048 bits."""
    data = pem.encode("ascii") if isinstance(pem, str) else pem
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise ValueError("not a PEM public key (SubjectPublicKeyInfo)") from exc
    if not isinstance(key, rsa.RSAPublicKey):
        raise ValueError("not an RSA public key")
    if key.key_size < MIN_KEY_BITS:
        raise ValueError(f"RSA key has {key.key_size} bits; at least {MIN_KEY_BITS} are required")
    return key


def fingerprint(public_pem: str) -> str:
    """SHA-256 of the DER public key, hex: shown instead of the key in lists."""
    der = load_public_key(public_pem).public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    digest = hashes.Hash(hashes.SHA256())
    digest.update(der)
    return digest.finalize().hex()
