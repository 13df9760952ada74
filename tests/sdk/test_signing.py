"""The SDK's own signing (no platform code) gives the fixed vectors of docs/api.md and tests/common/test_signing."""

import pytest

import payments_merchant
from payments_merchant import signing
from tests.common.test_signing import (PRIVATE_PEM, PUBLIC_PEM, VECTOR_1_BODY, VECTOR_1_SIGNATURE, VECTOR_1_STRING,
                                       VECTOR_2_BODY, VECTOR_2_SIGNATURE, VECTOR_2_STRING)

VECTORS = [(VECTOR_1_BODY, VECTOR_1_STRING, VECTOR_1_SIGNATURE), (VECTOR_2_BODY, VECTOR_2_STRING, VECTOR_2_SIGNATURE)]


@pytest.mark.parametrize(("body", "string", "signature"), VECTORS)
def test_sdk_string_to_sign_and_signature_match_the_docs_vectors(body, string, signature):
    key = signing.load_private_key(PRIVATE_PEM)
    assert signing.string_to_sign(body) == string.encode("utf-8")
    assert signing.sign(key, body) == signature
    assert signing.verify(signing.load_public_key(PUBLIC_PEM), body, signature)


def test_client_signs_the_docs_worked_example_exactly():
    """The client's own body building: fixed timestamp and nonce give the docs/api.md signature."""

    class Fixed(payments_merchant.PaymentsClient):
        def now(self) -> int:
            return VECTOR_2_BODY["timestamp"]

        def new_nonce(self) -> str:
            return VECTOR_2_BODY["nonce"]

    client = Fixed(api_root="http://127.0.0.1:1", merchant_no="M10000001", app_id="A10000001",
                   private_key=PRIVATE_PEM.decode(), key_version=1)
    assert client.signed_body({"currency": "PHP"}) == {**VECTOR_2_BODY, "sign": VECTOR_2_SIGNATURE}


@pytest.mark.parametrize("value", [1.5, {"a": 1}, [1]])
def test_values_the_contract_cannot_sign_are_refused_before_sending(value):
    with pytest.raises(signing.UnsignableValue):
        signing.string_to_sign({"amount": value})


def test_sdk_does_not_import_the_platform():
    import sys

    source_files = [m.__file__ for name, m in sys.modules.items() if name.startswith("payments_merchant")]
    for path in source_files:
        text = open(path).read()
        assert "from apps" not in text and "import apps" not in text and "django.conf" not in text, path
