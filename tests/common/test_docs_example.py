"""The Python example of docs/api.md signs a balance request that a live server accepts."""

import contextlib
import io
import re
from pathlib import Path

import pytest
from django.conf import settings

from apps.common import signing
from apps.ledger.services import balance_adjust


def _docs_example() -> str:
    text = (Path(settings.BASE_DIR) / "docs" / "api.md").read_text()
    section = text.split("### Python example", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.django_db(transaction=True)
def test_docs_python_example_gets_the_balance_from_a_live_server(live_server, merchant, tmp_path):
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=4200, reason="docs example")
    key_file = tmp_path / "merchant_private.pem"
    key_file.write_bytes(signing.private_key_to_pem(merchant.private_key))
    code = _docs_example()
    for name, value in {"BASE_URL": f"{live_server.url}/openapi/v1", "MERCHANT_NO": merchant.merchant_no,
                        "APP_ID": merchant.app_id, "KEY_FILE": str(key_file)}.items():
        code, count = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", code, flags=re.M)
        assert count == 1, name
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/api.md", "exec"), {"__name__": "docs_example"})  # noqa: S102 - our own docs
    assert out.getvalue().strip() == str({"code": "0", "msg": "OK",
                                          "data": {"currency": "PHP", "available": 4200, "settling": 0}})


def test_docs_worked_example_matches_the_signing_vector():
    from tests.common.test_signing import VECTOR_2_SIGNATURE, VECTOR_2_STRING

    text = (Path(settings.BASE_DIR) / "docs" / "api.md").read_text()
    assert VECTOR_2_STRING in text and VECTOR_2_SIGNATURE in text
