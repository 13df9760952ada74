"""Daily statements (docs/api.md, "Statements"): one merchant, one currency, one day in SETTLEMENT_TIME_ZONE.

The canonical form is a CSV: a signed header of `# key=value` lines, then the body (a column line, the opening of
each account, the day's movements with their running balance, the closing of each account). The header's fields
but `signature` are signed by the callback signer's rules (docs/api.md, "Signing": string to sign over flat fields,
RSA2 with the platform key of `key_version`); `digest` is the SHA-256 (hex) of the body's bytes. The JSON answer is read
back from that CSV, so both forms always say the same thing.
"""

import csv
import hashlib
import io
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from cryptography.hazmat.primitives.asymmetric import rsa
from django.conf import settings
from django.utils import timezone

from apps.common import signing
from apps.common.exports import csv_cell
from apps.ledger.models import MERCHANT_KINDS
from apps.ledger.selectors import statement_day_entries

COLUMNS = ("row", "time", "account", "kind", "cause", "amount", "balance")
# The header's order; every field but `signature` is signed.
HEADER_FIELDS = ("merchant_no", "currency", "date", "time_zone", "key_version", "digest", "sign_type", "signature")


@dataclass(frozen=True)
class SignedStatement:
    merchant_no: str
    currency: str
    date: date
    csv_text: str
    digest: str
    signature: str
    key_version: int


def settlement_zone() -> ZoneInfo:
    return ZoneInfo(settings.SETTLEMENT_TIME_ZONE)


def statement_today(now: datetime | None = None) -> date:
    """Today in SETTLEMENT_TIME_ZONE."""
    return (now or timezone.now()).astimezone(settlement_zone()).date()


def day_bounds(day: date) -> tuple[datetime, datetime]:
    """[00:00 of `day`, 00:00 of the next day) in SETTLEMENT_TIME_ZONE, as aware datetimes."""
    zone = settlement_zone()
    start = datetime.combine(day, time.min, tzinfo=zone)
    return start, datetime.combine(day + timedelta(days=1), time.min, tzinfo=zone)


def day_is_closed(day: date, now: datetime | None = None) -> bool:
    """Ended at least STATEMENT_CLOSE_DELAY_SECONDS ago: no posting of that day can still be committing."""
    return (now or timezone.now()) >= day_bounds(day)[1] + timedelta(seconds=settings.STATEMENT_CLOSE_DELAY_SECONDS)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(settlement_zone()).isoformat(timespec="seconds")


def _write(writer, row) -> None:
    # Every cell through the one spreadsheet rule (apps.common.exports): today's cells are numbers, times, kinds and
    # platform references, left as they are, so the signed bytes stay the same.
    writer.writerow([csv_cell(value) for value in row])


def statement_body(*, merchant_id: int, currency: str, day: date, final: bool = True) -> tuple[str, int]:
    """The CSV body of the statement and its number of movements. Closing = opening + the day's entries. A final
    statement (a closed day) stamps its closing rows with the day's end; a provisional one (today) with the time of
    its last movement (00:00 if none yet): the signed body says it is not the day's close, and the same movements
    still give the same bytes, digest and signature."""
    start, end = day_bounds(day)
    opening, entries = statement_day_entries(merchant_id=merchant_id, currency=currency, start=start, end=end)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    _write(writer, COLUMNS)
    running = dict(opening)
    as_of = start
    for kind in MERCHANT_KINDS:
        _write(writer, ("opening", _stamp(start), kind.value, "", "", "", opening[kind.value]))
    for entry in entries:
        kind = entry.account.kind
        running[kind] += entry.amount
        as_of = max(as_of, entry.posting.created_at)
        _write(writer, ("movement", _stamp(entry.posting.created_at), kind, entry.posting.kind, entry.posting.cause,
                         entry.amount, running[kind]))
    for kind in MERCHANT_KINDS:
        _write(writer, ("closing", _stamp(end if final else as_of), kind.value, "", "", running[kind.value] - opening[kind.value],
                         running[kind.value]))
    return out.getvalue(), len(entries)


def signed_fields(*, merchant_no: str, currency: str, day: date, key_version: int, digest: str) -> dict:
    """The flat fields the signature covers (the string to sign of docs/api.md, "Signing")."""
    return {"merchant_no": merchant_no, "currency": currency, "date": day.isoformat(),
            "time_zone": settings.SETTLEMENT_TIME_ZONE, "key_version": key_version, "digest": digest,
            "sign_type": signing.SIGN_TYPE}


def statement_sign(*, merchant_no: str, currency: str, day: date, body: str, key_version: int,
                   private_key: rsa.RSAPrivateKey) -> SignedStatement:
    """Header + body, signed with the given platform key."""
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
    fields = signed_fields(merchant_no=merchant_no, currency=currency, day=day, key_version=key_version, digest=digest)
    fields["signature"] = signing.sign(private_key, fields)
    header = "".join(f"# {name}={fields[name]}\n" for name in HEADER_FIELDS)
    return SignedStatement(merchant_no, currency, day, header + body, digest, fields["signature"], key_version)


def split_statement(csv_text: str) -> tuple[dict, str]:
    """The header's fields (as strings) and the body, exactly as bytes-to-hash."""
    header: dict[str, str] = {}
    rest = csv_text
    while rest.startswith("# "):
        line, _, rest = rest.partition("\n")
        name, _, value = line[2:].partition("=")
        header[name] = value
    return header, rest


def statement_verify(csv_text: str, public_key: rsa.RSAPublicKey) -> bool:
    """What a merchant does with a saved statement: the body hashes to `digest`, and the header verifies with the
    platform public key of its `key_version`."""
    header, body = split_statement(csv_text)
    if hashlib.sha256(body.encode("utf-8")).hexdigest() != header.get("digest"):
        return False
    fields = {name: value for name, value in header.items() if name != "signature"}
    if not fields.get("key_version", "").isdigit():
        return False
    fields["key_version"] = int(fields["key_version"])
    return signing.verify(public_key, fields, header.get("signature", ""))


def statement_data(statement: SignedStatement) -> dict:
    """The JSON `data` of the statement, read from its CSV."""
    header, body = split_statement(statement.csv_text)
    accounts = {kind.value: {"account": kind.value} for kind in MERCHANT_KINDS}
    movements = []
    closing_time = ""
    for row in csv.DictReader(io.StringIO(body)):
        if row["row"] == "movement":
            movements.append({"time": row["time"], "kind": row["kind"], "cause": row["cause"],
                              "account": row["account"], "amount": int(row["amount"]), "balance": int(row["balance"])})
        else:
            accounts[row["account"]][row["row"]] = int(row["balance"])
            closing_time = row["time"] if row["row"] == "closing" else closing_time
    return {"merchant_no": statement.merchant_no, "currency": statement.currency, "date": statement.date.isoformat(),
            "time_zone": header["time_zone"], "closing_time": closing_time,
            "final": closing_time == _stamp(day_bounds(statement.date)[1]),
            "accounts": list(accounts.values()), "movements": movements,
            "digest": statement.digest, "key_version": statement.key_version, "sign_type": header["sign_type"],
            "signature": statement.signature}
