"""RSA2 signing rules (docs/api.md, "Signing"): fixed vectors pasted as literals, round trips and properties."""

import base64
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.common import signing

VECTORS = Path(__file__).parent / "vectors"
PRIVATE_PEM = (VECTORS / "merchant_rsa2048_private.pem").read_bytes()
PUBLIC_PEM = (VECTORS / "merchant_rsa2048_public.pem").read_text()

# Vector 1: every rendering rule at once (byte-order keys, unicode, booleans, null and "" dropped, sign excluded).
VECTOR_1_BODY = {
    "merchant_no": "M10000001", "app_id": "A10000001", "key_version": 1, "timestamp": 1700000000,
    "nonce": "n0nce_Vector-01", "sign_type": "RSA2", "currency": "PHP", "amount": 150000,
    "subject": "Kape at pandesal ☕ — ₱1,500", "attach": "", "return_url": None, "notify": True, "test_mode": False,
    "Zeta": "upper-case keys sort first", "a_b": "x", "aB": "y", "sign": "excluded from the string to sign",
}
VECTOR_1_STRING = (
    "Zeta=upper-case keys sort first&aB=y&a_b=x&amount=150000&app_id=A10000001&currency=PHP&key_version=1"
    "&merchant_no=M10000001&nonce=n0nce_Vector-01&notify=true&sign_type=RSA2&subject=Kape at pandesal ☕ — ₱1,500"
    "&test_mode=false&timestamp=1700000000"
)
VECTOR_1_SIGNATURE = (
    "qR8tzlWyWUwrSzI9rikGOLP4xhbWEjY+8ci3FCzaYw88qZfd/9XxBXXAWVrQsgtMznbIRsYhbdfhaB8oELjP8BC4SbnTfvZuIYUZ0/Zl8wNAID1L"
    "4LiDrZQH2b8rxHOc8Nr6NBay7d8e+U4p4Z8b9utPv8VW9ZFyQu7y5sc1MptvpVLN4wmIguZoIONapv6X2wQAIRQq4ucorP850GTcguoVFLX2IpNx"
    "dp9xS+BDjuVnNuNtPjBfygdziiJq/8m5UyU0FN5w+eMRaFwAuAqp8DRWSEjxNsZxjwjbIVkyiBwSG0ubj5ScAP8eE7AlrIR2mvBwbRm5nWK6XLtX"
    "mkOk5A=="
)

# Vector 2: the balance request worked through in docs/api.md.
VECTOR_2_BODY = {"currency": "PHP", "merchant_no": "M10000001", "app_id": "A10000001", "key_version": 1,
                 "timestamp": 1700000000, "nonce": "3f9c2a7b1d4e4c0a", "sign_type": "RSA2"}
VECTOR_2_STRING = ("app_id=A10000001&currency=PHP&key_version=1&merchant_no=M10000001&nonce=3f9c2a7b1d4e4c0a"
                   "&sign_type=RSA2&timestamp=1700000000")
VECTOR_2_SIGNATURE = (
    "Jkaw9Cva3n8uIxBFpl3rDuJaxH1MtBo7hWrkOtpJAiBwGrkw1i8LzFm5M5Q0dmVgFrgiIGxMrpCybwOmo886uDKgweLZ0YGdZ6twx3N9BMHo4zr0"
    "w4jRy5SNDcxQlZOKwYVsqb7ksyFSqzFl2AJjhsQIDxitSzamu6o+rAayYkLhsmk2Cd4R714fWeVqXOVxDxKmgAYhfzSh02bG2Z1/ykT367cY3GwrA"
    "wECn5zp+LZ2nLH6aFpidVFJAzf6rUPY04lSL7VOUAdccZHguEvmIRbQZlwjE2JpF5na89ukX5ct70M/P9hKLiUQWytt7Vdv1mwBnMeDKm4N9ORpn"
    "ex7aQ=="
)


@pytest.fixture(scope="module")
def vector_key():
    return signing.load_private_key(PRIVATE_PEM)


@pytest.mark.parametrize(("body", "expected"), [(VECTOR_1_BODY, VECTOR_1_STRING), (VECTOR_2_BODY, VECTOR_2_STRING)])
def test_string_to_sign_matches_the_fixed_vector(body, expected):
    assert signing.string_to_sign(body) == expected.encode("utf-8")


@pytest.mark.parametrize(("body", "expected"), [(VECTOR_1_BODY, VECTOR_1_SIGNATURE), (VECTOR_2_BODY, VECTOR_2_SIGNATURE)])
def test_signature_matches_the_fixed_vector(vector_key, body, expected):
    # PKCS#1 v1.5 is deterministic: the same key and bytes always give the same signature.
    assert signing.sign(vector_key, body) == expected


@pytest.mark.parametrize(("body", "signature"), [(VECTOR_1_BODY, VECTOR_1_SIGNATURE), (VECTOR_2_BODY, VECTOR_2_SIGNATURE)])
def test_fixed_vector_signature_verifies_with_the_public_key(body, signature):
    assert signing.verify(signing.load_public_key(PUBLIC_PEM), body, signature)


def test_vector_public_key_is_the_private_keys_half(vector_key):
    assert signing.public_key_to_pem(vector_key.public_key()) == PUBLIC_PEM


def test_signature_is_standard_base64_with_padding_of_256_bytes():
    assert len(base64.b64decode(VECTOR_1_SIGNATURE, validate=True)) == 256
    assert "-" not in VECTOR_1_SIGNATURE and "_" not in VECTOR_1_SIGNATURE


def test_changing_any_signed_value_breaks_the_vector_signature():
    public_key = signing.load_public_key(PUBLIC_PEM)
    for field in ("currency", "nonce", "timestamp", "notify", "subject"):
        tampered = {**VECTOR_1_BODY, field: {"currency": "USD", "nonce": "n0nce_Vector-02", "timestamp": 1700000001,
                                             "notify": False, "subject": "Kape"}[field]}
        assert not signing.verify(public_key, tampered, VECTOR_1_SIGNATURE), field


def test_changing_only_sign_or_dropped_fields_keeps_the_vector_signature_valid():
    public_key = signing.load_public_key(PUBLIC_PEM)
    same = {**VECTOR_1_BODY, "sign": "other", "attach": None, "return_url": "", "memo": None}
    assert signing.verify(public_key, same, VECTOR_1_SIGNATURE)


def test_round_trip_with_a_fresh_key_and_refusal_with_another_key(rsa_keys):
    body = {"currency": "USD", "amount": 1, "flag": False, "nonce": signing.new_nonce()}
    signature = signing.sign(rsa_keys[0], body)
    assert signing.verify(rsa_keys[0].public_key(), body, signature)
    assert not signing.verify(rsa_keys[1].public_key(), body, signature)


@pytest.mark.parametrize("garbage", ["", "not base64!", "AAAA", VECTOR_1_SIGNATURE[:-2], VECTOR_1_SIGNATURE.lower()])
def test_verify_refuses_malformed_or_wrong_signatures(garbage):
    assert not signing.verify(signing.load_public_key(PUBLIC_PEM), VECTOR_1_BODY, garbage)


@pytest.mark.parametrize("value", [1.5, 1e3, {"a": 1}, [1, 2], []])
def test_objects_arrays_and_non_integer_numbers_cannot_be_signed(value):
    with pytest.raises(signing.UnsignableValue):
        signing.string_to_sign({"amount": value})


def test_string_to_sign_orders_keys_by_bytes_not_by_locale():
    body = {"b": "1", "B": "2", "_": "3", "a": "4", "A1": "5", "é": "6", "z": "7"}
    # Byte order: '1' < 'A' < 'B' < '_' < 'a' < 'b' < 'z' < 0xC3 (the first UTF-8 byte of é).
    assert signing.string_to_sign(body) == "A1=5&B=2&_=3&a=4&b=1&z=7&é=6".encode()


def test_string_to_sign_renders_booleans_ints_and_unicode():
    body = {"t": True, "f": False, "zero": 0, "neg": -42, "big": 2**53 - 1, "u": "Đồng ₫ 日本"}
    assert signing.string_to_sign(body) == f"big={2**53 - 1}&f=false&neg=-42&t=true&u=Đồng ₫ 日本&zero=0".encode()


def test_string_to_sign_drops_null_and_empty_but_keeps_zero_false_and_blank():
    body = {"a": None, "b": "", "c": 0, "d": False, "e": " ", "sign": "x"}
    assert signing.string_to_sign(body) == b"c=0&d=false&e= "


flat_values = st.one_of(st.none(), st.just(""), st.booleans(), st.integers(min_value=-(2**63), max_value=2**63),
                        st.text(max_size=20))
flat_bodies = st.dictionaries(st.text(min_size=1, max_size=12), flat_values, max_size=12)


@settings(max_examples=200, deadline=None)
@given(body=flat_bodies)
def test_property_string_to_sign_is_sorted_filtered_and_rendered(body):
    expected_pairs = []
    for key in sorted(body, key=lambda k: k.encode("utf-8")):
        value = body[key]
        if key == "sign" or value is None or value == "":
            continue
        rendered = ("true" if value else "false") if isinstance(value, bool) else str(value)
        expected_pairs.append(f"{key}={rendered}")
    assert signing.string_to_sign(body) == "&".join(expected_pairs).encode("utf-8")


@settings(max_examples=100, deadline=None)
@given(body=flat_bodies, data=st.data())
def test_property_string_to_sign_ignores_field_order_and_sign(body, data):
    shuffled = dict(data.draw(st.permutations(list(body.items()))))
    shuffled["sign"] = data.draw(st.text(max_size=20))
    assert signing.string_to_sign(shuffled) == signing.string_to_sign(body)


@settings(max_examples=25, deadline=None)
@given(body=flat_bodies)
def test_property_sign_then_verify_round_trips(vector_key, body):
    assert signing.verify(vector_key.public_key(), body, signing.sign(vector_key, body))


def test_public_keys_under_2048_bits_or_not_rsa_are_refused():
    from cryptography.hazmat.primitives.asymmetric import ec

    small = signing.public_key_to_pem(signing.generate_private_key(1024).public_key())
    with pytest.raises(ValueError, match="1024 bits"):
        signing.load_public_key(small)
    from cryptography.hazmat.primitives import serialization

    ec_pem = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    with pytest.raises(ValueError, match="not an RSA"):
        signing.load_public_key(ec_pem)
    with pytest.raises(ValueError, match="not a PEM"):
        signing.load_public_key(PRIVATE_PEM)  # a private key is not accepted where a public key is due
