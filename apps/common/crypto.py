"""Encryption at rest for platform private keys (Fernet, key from settings)."""

import base64

from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings


def _fernet() -> Fernet:
    configured = settings.PLATFORM_KEY_ENCRYPTION_KEY
    if configured:
        return Fernet(configured.encode("ascii"))
    # Development default: derived from SECRET_KEY, so nothing is stored in clear even locally.
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"platform-key-at-rest", info=b"fernet").derive(
        settings.SECRET_KEY.encode("utf-8")
    )
    return Fernet(base64.urlsafe_b64encode(derived))


def encrypt(plaintext: bytes) -> str:
    return _fernet().encrypt(plaintext).decode("ascii")


def decrypt(token: str) -> bytes:
    return _fernet().decrypt(token.encode("ascii"))
