"""No secret in any log line: a session-wide record of every log line, and the scan of it.

Every log record created while the test session runs is kept as text (message, exception and stack text). At the
end of the session `tests/conftest.py` scans them for: a PEM private key marker, the base64 body of any RSA private
key the suite generated or serialized (merchant test keys, platform keys), Django's SECRET_KEY, the Fernet key that
encrypts platform keys at rest, and any full payee account number of a payout or deny-list entry saved during the
run. A finding fails the run; the report names the logger and kind, never the secret.

Records are taken at creation (a log record factory), not by a handler on the root logger: a Celery worker started
by a test clears the root logger's handlers (worker_hijack_root_logger), which would silently end the recording.
"""

import base64
import logging
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass

PEM_PRIVATE_MARKER = "PRIVATE KEY"
_WINDOW = 32  # characters of a key body that count as a leak
_STEP = 16
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{%d,}" % _WINDOW)


@dataclass(frozen=True)
class LogLine:
    logger: str
    level: str
    text: str  # formatted message, plus exception and stack text when present


@dataclass(frozen=True)
class Finding:
    kind: str
    line: LogLine
    secret: str

    def redacted(self) -> str:
        text = self.line.text.replace(self.secret, "[REDACTED]") if self.secret else self.line.text
        return f"{self.kind} in {self.line.level} {self.line.logger}: {text[:300]!r}"


class Secrets:
    """What must never be logged. Literal strings, plus private key bodies matched by 32-character windows."""

    def __init__(self):
        self.literals: dict[str, str] = {}  # secret -> kind
        self.key_windows: set[str] = set()

    def add(self, kind: str, value: str | None, *, min_length: int = 8) -> None:
        if value and len(value) >= min_length:
            self.literals[value] = kind

    def add_private_key_pem(self, pem: bytes | str) -> None:
        text = pem.decode("ascii") if isinstance(pem, bytes) else pem
        body = "".join(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("-----"))
        # Windows every 16 characters: any leaked stretch of 48+ characters (a PEM line is 64) contains one.
        self.key_windows.update(body[i:i + _WINDOW] for i in range(0, len(body) - _WINDOW + 1, _STEP))


def scan(lines: list[LogLine], secrets: Secrets) -> list[Finding]:
    findings = []
    for line in lines:
        text = line.text
        if PEM_PRIVATE_MARKER in text:
            findings.append(Finding("PEM private key", line, ""))
        for value, kind in secrets.literals.items():
            if value in text:
                findings.append(Finding(kind, line, value))
        if secrets.key_windows:
            for run in _BASE64_RUN.findall(text):
                window = next((run[i:i + _WINDOW] for i in range(len(run) - _WINDOW + 1)
                               if run[i:i + _WINDOW] in secrets.key_windows), None)
                if window:
                    findings.append(Finding("private key body", line, run))
                    break
    return findings


# --- the session recorder ---------------------------------------------------------------------------------------

_lock = threading.Lock()
_session_lines: list[LogLine] = []
_diversions: list[list[LogLine]] = []  # innermost isolated() context receives instead of the session
_copies: list[list[LogLine]] = []  # capture() contexts receive a copy
session_secrets = Secrets()
_installed = False


def _text_of(record: logging.LogRecord) -> str:
    try:
        text = record.getMessage()
    except Exception:  # noqa: BLE001 - a badly formatted record is still recorded
        text = f"{record.msg!r} % {record.args!r}"
    if record.exc_info and record.exc_info[0] is not None:
        text += "\n" + logging.Formatter().formatException(record.exc_info)
    elif record.exc_text:
        text += "\n" + record.exc_text
    if record.stack_info:
        text += "\n" + record.stack_info
    return text


def install() -> None:
    """Record every log record created from now on (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    factory = logging.getLogRecordFactory()

    def recording_factory(*args, **kwargs):
        record = factory(*args, **kwargs)
        line = LogLine(record.name, record.levelname, _text_of(record))
        with _lock:
            (_diversions[-1] if _diversions else _session_lines).append(line)
            for copy in _copies:
                copy.append(line)
        return record

    logging.setLogRecordFactory(recording_factory)


@contextmanager
def _receiving(receivers: list[list[LogLine]]):
    """Yield a fresh list that stays in `receivers` (_diversions or _copies) until the context ends."""
    lines: list[LogLine] = []
    with _lock:
        receivers.append(lines)
    try:
        yield lines
    finally:
        with _lock:
            receivers.remove(lines)


def isolated():
    """Lines logged inside go to the yielded list only, not to the session (for tests of the detector itself)."""
    return _receiving(_diversions)


def capture():
    """Lines logged inside are yielded too, and stay in the session record."""
    return _receiving(_copies)


def watch_secret_sources() -> None:
    """Register secrets as the suite creates them: generated/serialized private keys, saved payee accounts, channel
    credentials."""
    from django.db.models.signals import post_save

    from apps.common import signing

    generate, to_pem = signing.generate_private_key, signing.private_key_to_pem

    def generate_private_key(*args, **kwargs):
        key = generate(*args, **kwargs)
        session_secrets.add_private_key_pem(to_pem(key))
        return key

    def private_key_to_pem(key):
        pem = to_pem(key)
        session_secrets.add_private_key_pem(pem)
        return pem

    signing.generate_private_key = generate_private_key
    signing.private_key_to_pem = private_key_to_pem

    def payee_saved(sender, instance, **kwargs):
        account = getattr(instance, "payee_account", "")
        # Accounts a fuzzer makes up ("00000000") could occur in an amount by chance: only distinctive ones.
        if len(set(account)) >= 4:
            session_secrets.add("full payee account", account)

    post_save.connect(payee_saved, sender="payout.Payout", weak=False, dispatch_uid="log_guard_payout")
    post_save.connect(payee_saved, sender="payout.DenyListedAccount", weak=False, dispatch_uid="log_guard_deny")

    def channel_saved(sender, instance, **kwargs):
        # Upstream credentials (docs/channels.md): write-only in the admin, never in a log line either.
        session_secrets.add("channel secret key", instance.secret_key)
        session_secrets.add("channel callback token", instance.callback_token)

    post_save.connect(channel_saved, sender="channels.Channel", weak=False, dispatch_uid="log_guard_channel")


def configured_secrets(secrets: Secrets) -> Secrets:
    """Add the secrets of the settings: SECRET_KEY and the Fernet key of platform keys at rest."""
    from django.conf import settings

    from apps.common import crypto

    secrets.add("SECRET_KEY", settings.SECRET_KEY)
    secrets.add("Fernet key", settings.PLATFORM_KEY_ENCRYPTION_KEY)
    fernet = crypto._fernet()
    secrets.add("Fernet key", base64.urlsafe_b64encode(fernet._signing_key + fernet._encryption_key).decode())
    return secrets


def session_findings() -> list[Finding]:
    with _lock:
        lines = list(_session_lines)
    return scan(lines, configured_secrets(session_secrets))


def session_line_count() -> int:
    return len(_session_lines)
