"""The merchant SDK (sdk/python, a dev dependency installed editable by `uv sync`) against the real platform."""

import io
import json

import pytest
from django.core.management import call_command

from payments_merchant import PaymentsClient
from tests.callbacks.conftest import clock, enqueue, hooked_merchant  # noqa: F401 - fixtures used here too
from tests.helpers import MerchantCtx


def sdk_client(live_server, ctx: MerchantCtx, **overrides) -> PaymentsClient:
    settings = dict(api_root=live_server.url, merchant_no=ctx.merchant_no, app_id=ctx.app_id,
                    private_key=ctx.private_key, key_version=ctx.key_version, timeout=30)
    settings.update(overrides)
    return PaymentsClient(**settings)


@pytest.fixture
def client(live_server, merchant) -> PaymentsClient:
    return sdk_client(live_server, merchant)


def platform_public_keys() -> dict[int, str]:
    """What the platform publishes (`manage.py platform_keys`), as a merchant stores it: PEM per version."""
    out = io.StringIO()
    call_command("platform_keys", stdout=out)
    return {item["key_version"]: item["public_key"] for item in json.loads(out.getvalue())["keys"]}
