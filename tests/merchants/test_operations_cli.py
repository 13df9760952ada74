"""Operations CLI (docs/api.md, "Operations CLI"): one JSON object on stdout, a clear message and non-zero exit on bad
input."""

import io
import json
import os
import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection

from apps.common import signing
from apps.common.models import AuditLog
from apps.ledger.models import Posting
from apps.merchants.models import Merchant, MerchantKey, PlatformKey

PRODUCT_KEYS = {"code", "kind", "currency", "fee_fixed", "fee_rate_bps", "min_amount", "max_amount"}


def run(command: str, *args) -> dict:
    out = io.StringIO()
    call_command(command, *args, stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())  # exactly one JSON object, nothing else


@pytest.fixture
def pem_file(tmp_path, rsa_keys):
    def write(key=None, bits: int | None = None, name: str = "merchant.pem") -> str:
        key = key or (signing.generate_private_key(bits) if bits else rsa_keys[0])
        path = tmp_path / name
        path.write_text(signing.public_key_to_pem(key.public_key()))
        return str(path)

    return write


def test_bootstrap_is_idempotent_with_bank_codes_and_platform_key(db):
    first = run("bootstrap")
    second = run("bootstrap")
    assert first == second
    assert set(first["currencies"]) >= {"PHP", "USD", "IDR", "VND", "JPY", "KWD"}
    assert "BDO" in first["bank_codes"]["PHP"] and set(first["bank_codes"]) >= {"PHP", "USD"}
    assert first["platform_key_version"] == 1
    assert PlatformKey.objects.filter(is_current=True).count() == 1 and PlatformKey.objects.count() == 1
    assert {"PHP_COLLECT_D0", "PHP_COLLECT_D1", "PHP_PAYOUT"} <= set(first["products"])


def test_bootstrap_keeps_what_staff_edited_and_brings_back_only_what_is_missing(db):
    from apps.channels.models import BankCode
    from apps.currencies.models import Currency
    from apps.merchants.models import Product

    run("bootstrap")
    Currency.objects.filter(code="VND").update(active=False, name="Dong (edited)")
    BankCode.objects.filter(currency_id="PHP", code="BDO").update(name="BDO (edited)")
    BankCode.objects.filter(currency_id="PHP", code="GCASH").update(is_active=False)
    BankCode.objects.filter(currency_id="PHP", code="BPI").delete()
    Product.objects.filter(code="PHP_PAYOUT").update(fee_fixed=2500, max_amount=700_000_00)
    Product.objects.filter(code="USD_COLLECT_D1").delete()
    counts = (Currency.objects.count(), BankCode.objects.count(), Product.objects.count())

    again = run("bootstrap")

    vnd = Currency.objects.get(code="VND")
    assert (vnd.active, vnd.name) == (False, "Dong (edited)")
    assert BankCode.objects.get(currency_id="PHP", code="BDO").name == "BDO (edited)"
    assert "GCASH" not in again["bank_codes"]["PHP"] and "BPI" in again["bank_codes"]["PHP"]  # inactive; re-seeded
    payout_product = Product.objects.get(code="PHP_PAYOUT")
    assert (payout_product.fee_fixed, payout_product.max_amount) == (2500, 700_000_00)
    assert Product.objects.filter(code="USD_COLLECT_D1").exists()
    assert (Currency.objects.count(), BankCode.objects.count(), Product.objects.count()) == (
        counts[0], counts[1] + 1, counts[2] + 1)


def test_create_merchant_output_has_the_contract_shape(bootstrapped, pem_file):
    out = run("create_merchant", "--name", "Acme Trading", "--public-key", pem_file(),
              "--collection-callback-url", "https://merchant.example/collect", "--currencies", "PHP,USD")
    assert {"merchant_no", "app_id", "key_version", "products", "review_thresholds", "platform_key_version",
            "platform_public_key"} <= set(out)
    assert out["merchant_no"].startswith("M") and out["app_id"].startswith("A") and out["key_version"] == 1
    by_code = {p["code"]: p for p in out["products"]}
    assert set(by_code) == {f"{c}_{p}" for c in ("PHP", "USD") for p in ("COLLECT_D0", "COLLECT_D1", "PAYOUT")}
    for product in out["products"]:
        if product["kind"] == "collection":
            assert set(product) == PRODUCT_KEYS | {"settlement"} and product["settlement"] in {"D0", "D1"}
        else:
            assert product["kind"] == "payout" and set(product) == PRODUCT_KEYS
        assert all(type(product[k]) is int for k in ("fee_fixed", "fee_rate_bps", "min_amount", "max_amount"))
        assert 1 <= product["min_amount"] <= product["max_amount"]
    assert by_code["PHP_COLLECT_D1"]["settlement"] == "D1" and by_code["PHP_COLLECT_D0"]["settlement"] == "D0"
    assert set(out["review_thresholds"]) == {"PHP", "USD"} and all(
        type(v) is int and v > 0 for v in out["review_thresholds"].values())
    assert out["platform_key_version"] == PlatformKey.objects.get(is_current=True).version
    assert out["platform_public_key"].startswith("-----BEGIN PUBLIC KEY-----\n")
    assert "PRIVATE" not in json.dumps(out)
    merchant = Merchant.objects.get(merchant_no=out["merchant_no"])
    assert merchant.collection_callback_url == "https://merchant.example/collect"
    assert AuditLog.objects.filter(action="merchant.create", object_id=str(merchant.pk)).exists()


def test_create_merchant_defaults_to_php(bootstrapped, pem_file):
    out = run("create_merchant", "--name", "Solo", "--public-key", pem_file())
    assert {p["currency"] for p in out["products"]} == {"PHP"} and list(out["review_thresholds"]) == ["PHP"]


@pytest.mark.parametrize(("args", "message"), [
    (["--public-key", "/nonexistent/key.pem"], "cannot read /nonexistent/key.pem"),
    (["--public-key", "SMALL"], "1024 bits; at least 2048"),
    (["--public-key", "GARBAGE"], "not a PEM public key"),
    (["--public-key", "OK", "--currencies", "PHP,XXX"], "unknown currency: XXX"),
    (["--public-key", "OK", "--collection-callback-url", "ftp://merchant.example/cb"], "http(s)"),
    (["--public-key", "OK", "--payout-callback-url", "merchant.example/cb"], "http(s)"),
    (["--public-key", "OK", "--name", " "], "name must not be empty"),
])
def test_create_merchant_with_bad_input_fails_clearly_and_creates_nothing(bootstrapped, pem_file, tmp_path, args,
                                                                         message):
    files = {"SMALL": pem_file(bits=1024, name="small.pem"), "OK": pem_file()}
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN PUBLIC KEY-----\nnot base64\n-----END PUBLIC KEY-----\n")
    files["GARBAGE"] = str(garbage)
    args = [files.get(a, a) for a in args]
    if "--name" not in args:
        args = ["--name", "Bad Input Co", *args]
    with pytest.raises(CommandError) as excinfo:
        run("create_merchant", *args)
    assert message in str(excinfo.value)
    assert not Merchant.objects.exists() and not MerchantKey.objects.exists()


def test_add_and_revoke_merchant_key(bootstrapped, pem_file, rsa_keys):
    created = run("create_merchant", "--name", "Keys Co", "--public-key", pem_file())
    added = run("add_merchant_key", created["merchant_no"], "--public-key", pem_file(rsa_keys[1], name="v2.pem"))
    assert added["merchant_no"] == created["merchant_no"] and added["key_version"] == 2
    revoked = run("revoke_merchant_key", created["merchant_no"], "1")
    assert revoked["key_version"] == 1 and isinstance(revoked["revoked_at"], int)
    keys = {k.version: k.revoked_at for k in MerchantKey.objects.filter(merchant__merchant_no=created["merchant_no"])}
    assert keys[1] is not None and keys[2] is None


def test_key_commands_with_bad_input_fail_clearly(bootstrapped, pem_file):
    created = run("create_merchant", "--name", "Keys Co", "--public-key", pem_file())
    with pytest.raises(CommandError, match="unknown merchant M0"):
        run("add_merchant_key", "M0", "--public-key", pem_file())
    with pytest.raises(CommandError, match="1024 bits"):
        run("add_merchant_key", created["merchant_no"], "--public-key", pem_file(bits=1024, name="small.pem"))
    with pytest.raises(CommandError, match="has no key version 7"):
        run("revoke_merchant_key", created["merchant_no"], "7")
    assert MerchantKey.objects.count() == 1


def test_adjust_balance_credits_and_debits_available(merchant):
    out = run("adjust_balance", merchant.merchant_no, "PHP", "5000", "--reason", "opening float")
    assert {k: out[k] for k in ("currency", "available", "settling")} == {"currency": "PHP", "available": 5000,
                                                                           "settling": 0}
    out = run("adjust_balance", merchant.merchant_no, "PHP", "-2000", "--reason", "correction of ticket 42")
    assert (out["available"], out["settling"]) == (3000, 0)
    assert Posting.objects.filter(kind="adjustment", memo="correction of ticket 42").exists()
    assert AuditLog.objects.filter(action="balance.adjust", reason="opening float").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["PHP", "-3001"], "would make available PHP negative"),
    (["JPY", "100"], "currency JPY is not enabled"),
    (["XXX", "100"], "currency XXX is not enabled"),
    (["PHP", "0"], "non-zero integer"),
])
def test_adjust_balance_refuses_overdraft_and_currencies_not_enabled(merchant, args, message):
    run("adjust_balance", merchant.merchant_no, "PHP", "3000", "--reason", "float")
    postings = Posting.objects.count()
    with pytest.raises(CommandError, match=message):
        run("adjust_balance", merchant.merchant_no, *args, "--reason", "test")
    assert Posting.objects.count() == postings


def test_adjust_balance_needs_a_reason_and_a_known_merchant(merchant):
    with pytest.raises(CommandError, match="reason"):
        run("adjust_balance", merchant.merchant_no, "PHP", "100", "--reason", "  ")
    with pytest.raises(CommandError, match="unknown merchant"):
        run("adjust_balance", "M0", "PHP", "100", "--reason", "x")
    assert not Posting.objects.exists()


def test_rotate_platform_key_and_list_platform_keys(bootstrapped):
    rotated = run("rotate_platform_key")
    assert rotated["platform_key_version"] == 2
    assert rotated["platform_public_key"].startswith("-----BEGIN PUBLIC KEY-----")
    listed = run("platform_keys")
    assert [(k["key_version"], k["current"]) for k in listed["keys"]] == [(1, False), (2, True)]
    assert listed["keys"][1]["public_key"] == rotated["platform_public_key"]
    assert all(set(k) == {"key_version", "public_key", "current"} for k in listed["keys"])
    assert "PRIVATE" not in json.dumps(listed) + json.dumps(rotated)


def test_platform_private_keys_are_encrypted_at_rest(bootstrapped):
    key = PlatformKey.objects.get(is_current=True)
    assert "PRIVATE KEY" not in key.private_key_encrypted
    from apps.merchants.selectors import platform_private_key

    private = platform_private_key(key)
    assert signing.public_key_to_pem(private.public_key()) == key.public_key_pem


def test_verify_ledger_prints_ok(merchant):
    run("adjust_balance", merchant.merchant_no, "PHP", "100", "--reason", "float")
    out = run("verify_ledger")
    assert out["ok"] is True and out["failures"] == []


def _manage(*args, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["uv", "run", "--frozen", "python", "manage.py", *args], cwd=settings.BASE_DIR, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.django_db(transaction=True)
def test_real_process_prints_json_on_stdout_and_errors_on_stderr_with_exit_codes(tmp_path, rsa_keys):
    db = connection.settings_dict
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test",
           "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"}
    key_path = Path(tmp_path / "merchant.pem")
    key_path.write_text(signing.public_key_to_pem(rsa_keys[0].public_key()))
    small_path = Path(tmp_path / "small.pem")
    small_path.write_text(signing.public_key_to_pem(signing.generate_private_key(1024).public_key()))

    boot = _manage("bootstrap", env=env)
    assert boot.returncode == 0, boot.stderr
    assert json.loads(boot.stdout)["platform_key_version"] == 1

    created = _manage("create_merchant", "--name", "Real Process Co", "--public-key", str(key_path), env=env)
    assert created.returncode == 0, created.stderr
    assert Merchant.objects.filter(merchant_no=json.loads(created.stdout)["merchant_no"]).exists()

    refused = _manage("create_merchant", "--name", "Small Key Co", "--public-key", str(small_path), env=env)
    assert refused.returncode != 0 and refused.stdout == ""
    assert "1024 bits; at least 2048 are required" in refused.stderr and "Traceback" not in refused.stderr
    assert Merchant.objects.count() == 1
