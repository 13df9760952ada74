"""No secret or private key in any log line. The whole session is checked at its end (tests/conftest.py,
tests/support/log_guard.py); these tests show the detector catches each kind of secret, and drive the paths
that handle secrets and account numbers with their log lines captured."""

import io
import logging

import pytest
from django.conf import settings
from django.core.management import call_command

from apps.common import crypto, signing
from apps.ledger.services import balance_adjust
from apps.payout import services as payout_services
from apps.payout.models import Payout, mask_account
from tests.helpers import assert_ok, signed_post
from tests.support import log_guard
from tests.support.log_guard import LogLine, Secrets, scan

ACCOUNT = "0012349876"  # the full payee account these tests use; only ••••9876 may ever be logged


def line(text: str) -> LogLine:
    return LogLine("apps.test", "ERROR", text)


def test_the_detector_finds_each_kind_of_secret_and_names_it_without_printing_it():
    key = signing.generate_private_key()
    pem = signing.private_key_to_pem(key).decode()
    body_line = pem.splitlines()[5]  # one 64-character line of the base64 body, without the PEM armour
    secrets = Secrets()
    secrets.add_private_key_pem(pem)
    secrets.add("SECRET_KEY", "a-very-secret-django-key-value")
    secrets.add("Fernet key", "x" * 43 + "=")
    secrets.add("full payee account", ACCOUNT)

    leaks = [line(f"key is {pem}"), line(f"signing with {body_line} now"),
             line("settings a-very-secret-django-key-value"), line("fernet " + "x" * 43 + "="),
             line(f"payout to {ACCOUNT}"), line("".join(pem.splitlines()[1:-1]))]
    findings = scan(leaks, secrets)
    assert {f.line.text for f in findings} == {leak.text for leak in leaks}  # every one caught
    assert [f.kind for f in findings if f.line is leaks[-1]] == ["private key body"]  # no armour, still caught
    assert {f.kind for f in findings} >= {"PEM private key", "private key body", "SECRET_KEY", "Fernet key",
                                          "full payee account"}
    for finding in findings:
        if finding.secret:
            assert finding.secret not in finding.redacted()


def test_the_detector_does_not_flag_what_may_be_logged():
    key = signing.generate_private_key()
    secrets = Secrets()
    secrets.add_private_key_pem(signing.private_key_to_pem(key))
    secrets.add("full payee account", ACCOUNT)
    other_key = signing.generate_private_key()
    fine = [line(f"payout PO1 created to {mask_account(ACCOUNT)}"),
            line(signing.public_key_to_pem(key.public_key())),  # the public half is public
            line(signing.private_key_to_pem(other_key).decode().splitlines()[3]),  # a body we never registered
            line("callback event 12 attempt 3 failed: HTTP 500")]
    assert scan(fine, secrets) == []


def test_a_private_key_logged_anywhere_is_caught_by_the_session_recorder():
    """A fake PEM logged inside an isolated recording: seen by the scan, kept out of the session's record."""
    pem = signing.private_key_to_pem(signing.generate_private_key()).decode()
    before = log_guard.session_line_count()
    with log_guard.isolated() as lines:
        logging.getLogger("apps.somewhere").error("could not load %s", pem)
        try:
            raise ValueError(pem.splitlines()[2])
        except ValueError:
            logging.getLogger("apps.somewhere").exception("boom")  # in the traceback text only
    assert [f.kind for f in scan(lines, log_guard.session_secrets)] == ["PEM private key", "private key body",
                                                                        "private key body"]
    assert log_guard.session_line_count() == before


def test_settings_secrets_are_known_to_the_session_check():
    secrets = log_guard.configured_secrets(Secrets())
    assert settings.SECRET_KEY in secrets.literals
    token = crypto.encrypt(b"hello")
    fernet_key = next(value for value, kind in secrets.literals.items() if kind == "Fernet key")
    from cryptography.fernet import Fernet

    assert Fernet(fernet_key.encode()).decrypt(token.encode()) == b"hello"  # it is the real key


@pytest.mark.django_db
def test_payout_lifecycle_logs_the_payee_account_masked_only(client, merchant, caplog, monkeypatch):
    from apps.channels.sandbox_payout import SandboxPayoutAdapter

    monkeypatch.setattr(SandboxPayoutAdapter, "start_disbursement", lambda self, *, payout: "REF-1")
    caplog.set_level(logging.DEBUG)  # every level, whatever an earlier test left on the root logger
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=10_000_000, reason="test funds")
    with log_guard.capture() as lines:
        data = assert_ok(signed_post(client, merchant, "/openapi/v1/payout/create", {
            "mch_order_no": "LOG-1", "product_code": "PHP_PAYOUT", "amount": 10_000, "currency": "PHP",
            "payee_name": "Payee", "payee_account": ACCOUNT, "bank_code": "BDO"}))
        payout = Payout.objects.get(platform_order_no=data["platform_order_no"])
        payout_services.payout_submit(payout_id=payout.pk)
        payout_services.payout_channel_result(platform_order_no=payout.platform_order_no, outcome="paid")
        payout_services.payout_reverse(payout_id=payout.pk, reversal_amount=10_000, fee_refund=0, reason="test")
        # A refused request (bad account format) logs nothing that carries the value either.
        signed_post(client, merchant, "/openapi/v1/payout/create", {
            "mch_order_no": "LOG-2", "product_code": "PHP_PAYOUT", "amount": 10_000, "currency": "PHP",
            "payee_name": "Payee", "payee_account": ACCOUNT + "-x", "bank_code": "BDO"})
    assert any(mask_account(ACCOUNT) in entry.text for entry in lines), [entry.text for entry in lines]
    secrets = Secrets()
    secrets.add("full payee account", ACCOUNT)
    assert scan(lines, secrets) == []


@pytest.mark.django_db
def test_key_handling_commands_log_no_key_material(bootstrapped):
    with log_guard.capture() as lines:
        logging.getLogger("apps.merchants").info("rotating")  # the capture works
        call_command("rotate_platform_key", stdout=io.StringIO())
        call_command("platform_keys", stdout=io.StringIO())
        call_command("bootstrap", stdout=io.StringIO())
    assert any(entry.text == "rotating" for entry in lines)
    assert scan(lines, log_guard.configured_secrets(log_guard.session_secrets)) == []
