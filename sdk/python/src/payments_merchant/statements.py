"""Verifying a statement (docs/api.md, "Statements"): the CSV's body hashes to its `digest`, and the platform signed the
header's fields with the key of its `key_version`. Keep the CSV: it is the document the signature covers."""

from __future__ import annotations

import csv
import hashlib
import io
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo
from collections.abc import Mapping
from typing import Any

from payments_merchant import signing
from payments_merchant.callbacks import PublicKeys
from payments_merchant.errors import StatementVerificationError

SIGNED_FIELDS = ("currency", "date", "digest", "key_version", "merchant_no", "sign_type", "time_zone")


def split_statement(csv_text: str) -> tuple[dict[str, str], str]:
    """The `# name=value` header's fields and the body (the column line to the end: the bytes of `digest`)."""
    header: dict[str, str] = {}
    rest = csv_text
    while rest.startswith("# "):
        line, _, rest = rest.partition("\n")
        name, _, value = line[2:].partition("=")
        header[name] = value
    return header, rest


def verify_statement(statement: bytes | str | Mapping[str, Any], public_keys: PublicKeys) -> dict[str, Any]:
    """Verify a statement: the CSV (bytes or text) in full, or the JSON `data` of `statement` (its signature only:
    the JSON's figures are tied to the CSV through `digest`, which only the CSV can be hashed against).

    Returns the signed fields; raises `StatementVerificationError` for a body that does not hash to `digest`, an
    unknown `key_version`, or a signature that does not verify."""
    if isinstance(statement, Mapping):
        fields = {name: statement.get(name) for name in SIGNED_FIELDS}
        signature = statement.get("signature")
    else:
        try:
            text = statement.decode("utf-8") if isinstance(statement, bytes) else statement
        except UnicodeDecodeError as exc:
            raise StatementVerificationError("the statement is not UTF-8") from exc
        header, body = split_statement(text)
        if hashlib.sha256(body.encode("utf-8")).hexdigest() != header.get("digest"):
            raise StatementVerificationError("the statement's body does not hash to its digest")
        fields = {name: header.get(name) for name in SIGNED_FIELDS}
        if isinstance(fields["key_version"], str) and fields["key_version"].isdigit():
            fields["key_version"] = int(fields["key_version"])
        signature = header.get("signature")
    key_version = fields["key_version"]
    if not isinstance(key_version, int) or isinstance(key_version, bool) or key_version not in public_keys:
        raise StatementVerificationError(f"no platform public key for key_version {key_version!r}")
    if not isinstance(signature, str) or not signing.verify(
            signing.load_public_key(public_keys[key_version]), fields, signature):
        raise StatementVerificationError("the statement's signature does not verify")
    return fields


def statement_is_final(csv_text: str) -> bool:
    """Whether a statement's CSV is the day's final one: its closing rows are at the next day's 00:00 in its
    `time_zone`. Today's provisional statement closes at its last movement instead (docs/api.md, "Statements"). Read
    from the body, which the digest and signature cover: verify the statement first."""
    header, body = split_statement(csv_text)
    day = date.fromisoformat(header["date"])
    end = datetime.combine(day + timedelta(days=1), time.min, tzinfo=ZoneInfo(header["time_zone"]))
    closings = {row["time"] for row in csv.DictReader(io.StringIO(body)) if row["row"] == "closing"}
    return closings == {end.isoformat(timespec="seconds")}
