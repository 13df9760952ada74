"""PLATFORM_ENVIRONMENT (docs/channels.md): a live deployment refuses to register, seed or route to a sandbox channel
and answers 1001 without a real one; a sandbox deployment takes only sandbox channels and says SANDBOX on its pages."""

import json
import os
import subprocess
import sys
from io import StringIO

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.test import Client

from apps.channels.admin import ChannelForm
from apps.channels.models import Channel
from apps.channels.registry import payout_adapter, serving_channel
from apps.channels.environment import ChannelNotAllowed
from apps.collection.models import CollectionOrder
from apps.ledger.models import Posting
from tests.channels.conftest import xendit_channel_create
from tests.collection.conftest import create as collection_create_api
from tests.collection.conftest import create_ok as collection_create_ok
from tests.helpers import assert_error
from tests.payout.conftest import create as payout_create_api
from tests.payout.conftest import fund

pytestmark = pytest.mark.django_db


def test_live_bootstrap_seeds_no_sandbox_channel_and_keeps_its_output_shape(live):
    out = StringIO()
    call_command("bootstrap", stdout=out)
    result = json.loads(out.getvalue())
    assert set(result) == {"currencies", "products", "bank_codes", "platform_key_version"}
    assert "PHP" in result["currencies"] and result["bank_codes"]["PHP"]
    assert not Channel.objects.exists()


def test_sandbox_bootstrap_seeds_sandbox_channels(bootstrapped):
    assert set(Channel.objects.values_list("adapter", flat=True)) == {"sandbox"}
    assert Channel.objects.filter(currency_id="PHP").count() == 2


def test_live_deployment_refuses_to_register_a_sandbox_channel(bootstrapped, live):
    with pytest.raises(ValidationError, match="sandbox"):
        Channel.objects.create(code="SNEAKY", name="Sneaky", adapter="sandbox", direction="payin", currency_id="PHP")
    form = ChannelForm(data={"code": "SNEAKY2", "name": "Sneaky", "adapter": "sandbox", "direction": "payout",
                             "currency": "PHP", "priority": 1, "is_active": True})
    assert not form.is_valid() and "adapter" in form.errors
    assert not Channel.objects.filter(code__startswith="SNEAKY").exists()


def test_sandbox_deployment_refuses_a_real_upstream_channel(bootstrapped, xendit_emulator):
    with pytest.raises(ValidationError, match="real upstream"):
        xendit_channel_create(code="XENDIT_IN_SANDBOX", direction="payin", emulator=xendit_emulator)
    assert not Channel.objects.filter(adapter="xendit").exists()


def test_unknown_adapter_is_refused(bootstrapped):
    with pytest.raises(ValidationError, match="no payin adapter"):
        Channel.objects.create(code="X", name="X", adapter="nope", direction="payin", currency_id="PHP")


def test_live_deployment_with_only_sandbox_channels_answers_1001_for_pay_and_payout_create(merchant, live):
    # bootstrapped in sandbox: the sandbox channels are in the table, active, and still never serve a live order
    assert Channel.objects.filter(adapter="sandbox", currency_id="PHP", is_active=True).count() == 2
    assert serving_channel(currency="PHP", direction=Channel.Direction.PAYIN) is None
    fund(merchant, 1_000_000)
    postings = Posting.objects.count()
    body = assert_error(collection_create_api(Client(), merchant, product_code="PHP_COLLECT_D0"), "1001", 422)
    assert "PHP" in body["msg"]
    assert_error(payout_create_api(Client(), merchant), "1001", 422)
    assert not CollectionOrder.objects.exists()
    assert Posting.objects.count() == postings


def test_live_deployment_routes_to_the_real_channel(xendit_channels, merchant):
    assert serving_channel(currency="PHP", direction=Channel.Direction.PAYIN) == xendit_channels["payin"]
    assert serving_channel(currency="PHP", direction=Channel.Direction.PAYOUT) == xendit_channels["payout"]


def test_sandbox_order_left_in_a_live_deployment_cannot_be_paid_with_the_sandbox_button(merchant, settings):
    client = Client()
    order = collection_create_ok(client, merchant, product_code="PHP_COLLECT_D0")  # in sandbox
    page = client.get(f"/pay/{order.pay_token}")
    assert b"data-testid=\"sandbox-banner\"" in page.content
    token = page.content.split(b'name="csrfmiddlewaretoken" value="')[1].split(b'"')[0].decode()
    settings.PLATFORM_ENVIRONMENT = "live"
    postings = Posting.objects.count()
    response = client.post(f"/pay/{order.pay_token}", {"csrfmiddlewaretoken": token, "action": "pay"})
    assert response.status_code >= 400
    assert b"Pay</button>" not in response.content and b"sandbox-banner" not in response.content
    order.refresh_from_db()
    assert order.status == "CREATED" and Posting.objects.count() == postings
    with pytest.raises(ChannelNotAllowed):
        payout_adapter(Channel.objects.get(code="SANDBOX_PHP_PAYOUT"))


def test_sandbox_settlement_task_moves_nothing_in_a_live_deployment(merchant, settings):
    from apps.channels.sandbox_payout import sandbox_payout_settle
    from apps.payout.services import payout_submit
    from tests.payout.conftest import create_ok as payout_create_ok

    fund(merchant, 1_000_000)
    payout = payout_create_ok(Client(), merchant)
    payout_submit(payout_id=payout.pk)  # the sandbox queues its settlement (no worker in this test)
    settings.PLATFORM_ENVIRONMENT = "live"
    postings = Posting.objects.count()
    sandbox_payout_settle(payout.platform_order_no, "paid")
    payout.refresh_from_db()
    assert payout.status == "PROCESSING" and Posting.objects.count() == postings


@pytest.mark.parametrize(("module", "environ", "expected"), [
    ("config.settings.production", {}, "live"),
    ("config.settings.production", {"PLATFORM_ENVIRONMENT": "sandbox"}, "sandbox"),
    ("config.settings.test", {}, "sandbox"),
    ("config.settings.production", {"PLATFORM_ENVIRONMENT": "staging"}, "ImproperlyConfigured"),
])
def test_platform_environment_defaults_live_in_production_and_sandbox_elsewhere(module, environ, expected):
    env = {"CELERY_BROKER_URL": "amqp://guest:guest@127.0.0.1:5672/payments", **os.environ,
           "DJANGO_SETTINGS_MODULE": module, "SECRET_KEY": "x" * 50, "ALLOWED_HOSTS": "example.com",
           "PLATFORM_KEY_ENCRYPTION_KEY": "A" * 43 + "=", "DATABASE_URL": django_settings.DATABASES and
           os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/x"), **environ}
    env.pop("PLATFORM_ENVIRONMENT", None) if "PLATFORM_ENVIRONMENT" not in environ else None
    code = ("import django\ntry:\n    from django.conf import settings; print(settings.PLATFORM_ENVIRONMENT)\n"
            "except Exception as exc:\n    print(type(exc).__name__)")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                            cwd=django_settings.BASE_DIR)
    assert result.stdout.strip().splitlines()[-1] == expected, result.stderr[-2000:]
