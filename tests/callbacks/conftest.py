import socket
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.db import transaction

from apps.callbacks.enqueue import callback_enqueue, collection_success_payload
from apps.callbacks.models import CallbackEvent


def closed_port_url() -> str:
    """A URL on 127.0.0.1 whose port nothing listens on (bound, then released)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}/callback"


def self_signed_certificate(tmp_path, hostname: str) -> tuple[str, str]:
    """A certificate for `hostname` and its key, as PEM files in tmp_path: (certificate path, key path)."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


def paid_order(no: str = "C20260101000000abc", **overrides) -> SimpleNamespace:
    fields = dict(platform_order_no=no, mch_order_no="M-1", amount=12345, currency_id="PHP",
                  paid_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), attach="order=7")
    fields.update(overrides)
    return SimpleNamespace(**fields)


@pytest.fixture
def hooked_merchant(merchant, callback_receiver):
    """The merchant with both callback URLs on the local receiver."""
    m = merchant.merchant
    m.collection_callback_url = callback_receiver.url
    m.payout_callback_url = callback_receiver.url
    m.save(update_fields=["collection_callback_url", "payout_callback_url"])
    return m


@pytest.fixture
def dispatched(monkeypatch):
    """Event ids handed to the broker: recorded instead of queued, so the test drives each attempt itself."""
    from apps.callbacks import tasks

    ids: list[int] = []
    monkeypatch.setattr(tasks.deliver_callback, "delay", lambda event_id: ids.append(event_id))
    return ids


@pytest.fixture
def enqueue():
    """Enqueue an event the way the order services do (inside their transaction); returns the event."""

    def _enqueue(merchant, *, type=CallbackEvent.Type.COLLECTION_SUCCESS, no="C20260101000000abc", payload=None):
        with transaction.atomic():
            return callback_enqueue(merchant=merchant, type=type, platform_order_no=no,
                                    payload=payload or collection_success_payload(paid_order(no)))

    return _enqueue


class Clock:
    """Frozen time that tests move by hand (time_machine): schedules are checked to the second."""

    def __init__(self, time_machine):
        self._tm = time_machine
        self.now = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
        self._tm.move_to(self.now, tick=False)

    def advance(self, seconds: float) -> datetime:
        self.now = self.now + timedelta(seconds=seconds)
        self._tm.move_to(self.now, tick=False)
        return self.now

    def set(self, moment: datetime) -> datetime:
        self.now = moment
        self._tm.move_to(moment, tick=False)
        return moment


@pytest.fixture
def clock(time_machine) -> Clock:
    return Clock(time_machine)


@pytest.fixture(autouse=True)
def _no_kept_connections():
    """Each test starts without the connections an earlier test's attempts kept alive (apps.callbacks.transport)."""
    from apps.callbacks import transport

    transport.close_connections()
    yield
    transport.close_connections()
