"""The `payments-merchant` console script, run as a subprocess against a live server."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from apps.common import signing
from apps.ledger.services import balance_adjust

pytestmark = pytest.mark.django_db(transaction=True)

CLI = str(Path(sys.executable).parent / "payments-merchant")


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PAYMENTS_")}
    environment.update(env or {})
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=60, env=environment)


@pytest.fixture
def key_file(merchant, tmp_path) -> str:
    path = tmp_path / "merchant.pem"
    path.write_bytes(signing.private_key_to_pem(merchant.private_key))
    return str(path)


def test_cli_prints_the_balance_json(live_server, merchant, key_file):
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=4200, reason="cli test")
    done = run_cli("--api-root", live_server.url, "--merchant-no", merchant.merchant_no, "--app-id", merchant.app_id,
                   "--key", key_file, "balance", "--currency", "PHP")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"currency": "PHP", "available": 4200, "settling": 0}


def test_cli_takes_its_settings_from_the_environment_and_prints_errors_as_json(live_server, merchant, key_file):
    env = {"PAYMENTS_API_ROOT": live_server.url, "PAYMENTS_MERCHANT_NO": merchant.merchant_no,
           "PAYMENTS_APP_ID": merchant.app_id, "PAYMENTS_KEY_FILE": key_file, "PAYMENTS_KEY_VERSION": "1"}
    created = run_cli("pay-create", "--mch-order-no", "cli-1", "--product-code", "PHP_COLLECT_D1", "--amount", "10000",
                      "--currency", "PHP", "--subject", "Kape ☕", env=env)
    assert created.returncode == 0, created.stderr
    order = json.loads(created.stdout)
    assert order["status"] == "CREATED" and order["mch_order_no"] == "cli-1"
    queried = run_cli("pay/query", "--platform-order-no", order["platform_order_no"], env=env)
    assert json.loads(queried.stdout)["mch_order_no"] == "cli-1"

    missing = run_cli("payout-query", "--mch-order-no", "nope", env=env)
    assert missing.returncode == 1
    assert json.loads(missing.stdout) == {"code": "2002", "msg": json.loads(missing.stdout)["msg"], "http_status": 404}

    currencies = run_cli("currencies", "--api-root", live_server.url)  # public: no merchant settings needed
    assert "PHP" in {c["code"] for c in json.loads(currencies.stdout)["items"]}


def test_cli_without_a_key_says_what_is_missing(live_server):
    done = run_cli("--api-root", live_server.url, "balance")
    assert done.returncode == 2 and "--merchant-no, --app-id, --key required" in done.stderr


def test_cli_verifies_a_delivered_callback_with_the_published_platform_keys(hooked_merchant, callback_receiver,
                                                                             enqueue, tmp_path):
    from django.core.management import call_command

    from apps.callbacks.deliver import callback_deliver

    callback_deliver(event_id=enqueue(hooked_merchant).pk)
    [received] = callback_receiver.requests
    (tmp_path / "callback.json").write_bytes(received.raw)
    with open(tmp_path / "platform_keys.json", "w") as out:
        call_command("platform_keys", stdout=out)
    ok = run_cli("verify-callback", str(tmp_path / "callback.json"), "--platform-keys",
                 str(tmp_path / "platform_keys.json"))
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == {"type": "CollectionSuccess", **received.body}

    (tmp_path / "tampered.json").write_text(json.dumps({**received.body, "amount": 1}))
    bad = run_cli("verify-callback", str(tmp_path / "tampered.json"), "--platform-keys",
                  str(tmp_path / "platform_keys.json"))
    assert bad.returncode == 1 and json.loads(bad.stdout)["verified"] is False


def test_cli_with_an_unreadable_key_file_says_so(live_server, tmp_path):
    (tmp_path / "not-a-key.pem").write_text("hello")
    done = run_cli("balance", "--api-root", live_server.url, "--merchant-no", "M1", "--app-id", "A1",
                   "--key", str(tmp_path / "not-a-key.pem"))
    assert done.returncode == 2 and "cannot use the key" in done.stderr and "Traceback" not in done.stderr


def test_cli_piped_into_a_reader_that_stopped_exits_quietly_like_sigpipe(tmp_path):
    (tmp_path / "callback.json").write_text('{"not": "signed"}')
    (tmp_path / "key.pem").write_text("unused")
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the CLI writes, as `... | head -1` after its line
    try:
        done = subprocess.run([CLI, "verify-callback", str(tmp_path / "callback.json"), "--platform-key",
                               f"1={tmp_path / 'key.pem'}"], stdout=write, stderr=subprocess.PIPE, text=True,
                              timeout=60)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


def test_cli_refunds_a_paid_order_and_queries_the_refund(live_server, merchant, key_file):
    from apps.collection.services import collection_notify_paid

    env = {"PAYMENTS_API_ROOT": live_server.url, "PAYMENTS_MERCHANT_NO": merchant.merchant_no,
           "PAYMENTS_APP_ID": merchant.app_id, "PAYMENTS_KEY_FILE": key_file}
    order = json.loads(run_cli("pay-create", "--mch-order-no", "cli-rf", "--product-code", "PHP_COLLECT_D0",
                               "--amount", "10000", "--currency", "PHP", env=env).stdout)
    collection_notify_paid(platform_order_no=order["platform_order_no"])
    created = run_cli("refund-create", "--mch-order-no", "cli-rf", "--mch-refund-no", "cli-rf-1", "--amount", "2500",
                      "--reason", "wrong size", env=env)
    assert created.returncode == 0, created.stderr
    refund = json.loads(created.stdout)
    assert (refund["status"], refund["refundable"]) == ("PROCESSING", 7500)
    queried = run_cli("refund/query", "--refund-no", refund["refund_no"], env=env)
    assert json.loads(queried.stdout)["mch_refund_no"] == "cli-rf-1"
    beyond = run_cli("refund-create", "--platform-order-no", order["platform_order_no"], "--mch-refund-no", "cli-rf-2",
                     "--amount", "7501", env=env)
    assert beyond.returncode == 1
    assert json.loads(beyond.stdout)["code"] == "2008"
