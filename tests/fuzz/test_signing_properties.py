"""Hypothesis properties of the string to sign (docs/api.md, "Signing") against an independent oracle written here.

tests/common/test_signing.py pins fixed vectors and a first property; this file adds what it leaves out:
keys built to collide in case, '_' and non-ASCII; integers past 2^63; sign -> verify over arbitrary bodies with
a real key; every single-field change breaks the signature; what the scheme cannot tell apart; and
parse_flat_json_object against arbitrary JSON.
"""

import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from apps.common import signing
from apps.common.api.parsers import parse_flat_json_object
from apps.common.errors import ApiError, ErrorCode
from tests.fuzz.conftest import fuzz_settings


def oracle_string_to_sign(body: dict) -> bytes:
    """docs/api.md, "The string to sign", steps 1-5, read literally and worked on bytes: no code shared with
    apps.common.signing."""
    pairs = []
    for key, value in body.items():
        if key == "sign" or value is None or (isinstance(value, str) and len(value) == 0):  # steps 1, 2
            continue
        if value is True or value is False:  # step 4 (bool before int: True == 1 in Python)
            rendered = b"true" if value else b"false"
        elif type(value) is int:
            rendered = b"%d" % value
        else:
            rendered = value.encode("utf-8")
        pairs.append((key.encode("utf-8"), rendered))
    pairs.sort(key=lambda pair: pair[0])  # step 3: bytes compare by unsigned byte value
    return b"&".join(key + b"=" + value for key, value in pairs)  # step 5


# Keys from an alphabet where byte order is not any human order: digits < upper case < '_' < lower case < non-ASCII,
# upper/lower twins, '_' vs letters, 2- 3- and 4-byte UTF-8, and the literal 'sign' (always excluded).
KEY_ALPHABET = "aAbBzZ_-09éÉßǅ日本€😀ÿ"
keys = st.one_of(st.text(KEY_ALPHABET, min_size=1, max_size=6), st.text(min_size=1, max_size=6),
                 st.sampled_from(["sign", "sign_type", "Sign", "signs", "a_b", "aB", "a", "A", "_", "é", "z"]))
values = st.one_of(
    st.none(), st.just(""), st.booleans(),
    st.integers(),  # unbounded: negative, zero, past 2^63 and 2^64
    st.sampled_from([2**63, 2**63 - 1, -(2**63), 2**64 + 1, -1, 0, 10**30]),
    st.text(max_size=12), st.text(KEY_ALPHABET + "&= ", max_size=6),
)
bodies = st.dictionaries(keys, values, max_size=10)


@fuzz_settings(scale=5)
@given(body=bodies)
def test_string_to_sign_equals_the_independent_oracle(body):
    assert signing.string_to_sign(body) == oracle_string_to_sign(body)


@fuzz_settings(scale=2)
@given(key=st.text(min_size=1, max_size=4), other=st.text(min_size=1, max_size=4))
def test_byte_order_of_utf8_keys_is_code_point_order(key, other):
    """Why 'byte order' needs no locale or normalisation: UTF-8 preserves code-point order."""
    assert (key.encode() < other.encode()) == (key < other)


@fuzz_settings(scale=2)
@given(n=st.integers())
def test_integers_render_in_plain_decimal_and_booleans_as_words(n):
    assert signing.string_to_sign({"n": n, "t": True, "f": False}) == f"f=false&n={n}&t=true".encode()


@pytest.fixture(scope="module")
def key_pair(rsa_keys):
    return rsa_keys[2]


signable_bodies = st.dictionaries(keys.filter(lambda k: k != "sign"), values, min_size=1, max_size=8)


@fuzz_settings(scale=0.5)
@given(body=signable_bodies)
def test_sign_then_verify_round_trips_for_any_body(key_pair, body):
    signature = signing.sign(key_pair, body)
    assert signing.verify(key_pair.public_key(), {**body, "sign": signature}, signature)


def _renders_differently(old, new) -> bool:
    return oracle_string_to_sign({"k": old}) != oracle_string_to_sign({"k": new})


@fuzz_settings(scale=0.5)
@given(body=signable_bodies, data=st.data())
def test_any_single_field_change_breaks_the_signature(key_pair, body, data):
    signature = signing.sign(key_pair, body)
    tampered = dict(body)
    how = data.draw(st.sampled_from(["change", "drop", "add"]))
    if how == "add":
        key = data.draw(keys.filter(lambda k: k not in body and k != "sign"))
        tampered[key] = data.draw(values.filter(lambda v: v is not None and v != ""))
    else:
        key = data.draw(st.sampled_from(sorted(body)))
        assume(body[key] is not None and body[key] != "")  # an absent field cannot be dropped or changed
        if how == "drop":
            tampered[key] = data.draw(st.sampled_from([None, ""]))
        else:
            tampered[key] = data.draw(values.filter(lambda v: _renders_differently(body[key], v)))
    assert not signing.verify(key_pair.public_key(), tampered, signature)


@fuzz_settings(scale=0.5)
@given(body=signable_bodies, data=st.data())
def test_changes_invisible_to_the_string_keep_the_signature(key_pair, body, data):
    """The limits of the scheme, stated so nobody relies on more: the signature binds the rendered text, not the
    JSON types (1 and "1" sign alike) and not absent fields (null, "" and missing sign alike). The API makes
    the type confusion harmless by refusing strings where integers are due (StrictIntegerField, 1000)."""
    signature = signing.sign(key_pair, body)
    same = {key: (str(v) if type(v) is int else v) for key, v in body.items()}  # 42 -> "42"; booleans kept
    same[data.draw(keys.filter(lambda k: k not in body and k != "sign"))] = data.draw(st.sampled_from([None, ""]))
    same = dict(data.draw(st.permutations(list(same.items()))))
    assert signing.verify(key_pair.public_key(), same, signature)


def test_values_containing_separators_make_the_string_ambiguous():
    """The string to sign does not escape '&' or '='; two different bodies can share a string to sign. Documented in
    docs/fuzzing.md: a request cannot be forged this way without the merchant signing the other body."""
    assert signing.string_to_sign({"a": "1&b=2"}) == signing.string_to_sign({"a": "1", "b": "2"})


# parse_flat_json_object: what "The string to sign" step 4 and "Error codes" (1000) say about bodies, over arbitrary
# JSON.
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10))
json_anything = st.recursive(
    st.one_of(json_scalars, st.floats(allow_nan=True, allow_infinity=True)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10)


def _refused(raw: bytes) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse_flat_json_object(raw)
    assert caught.value.error is ErrorCode.INVALID_REQUEST and caught.value.error.code == "1000"
    return caught.value


@fuzz_settings(scale=3)
@given(body=st.dictionaries(st.text(max_size=8), json_scalars, max_size=8))
def test_every_flat_object_parses_to_itself(body):
    assert parse_flat_json_object(json.dumps(body).encode()) == body
    assert parse_flat_json_object(json.dumps(body, ensure_ascii=False).encode()) == body


@fuzz_settings(scale=3)
@given(body=st.dictionaries(st.text(max_size=8), json_scalars, max_size=5), key=st.text(max_size=8),
       bad=st.one_of(json_anything.filter(lambda v: isinstance(v, (list, dict, float))),
                     st.floats(allow_nan=True, allow_infinity=True)))
def test_nested_values_and_non_integer_numbers_are_1000(body, key, bad):
    raw = json.dumps({**body, key: bad}).encode()  # json.dumps writes NaN / Infinity / -Infinity literally
    _refused(raw)


@fuzz_settings(scale=2)
@given(value=json_anything.filter(lambda v: not isinstance(v, dict)))
def test_anything_but_an_object_is_1000(value):
    _refused(json.dumps(value).encode())


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1.0", "1e3", "-0.0", "1E+2", "0.5"])
def test_every_non_integer_number_literal_is_1000(literal):
    _refused(b'{"amount": ' + literal.encode() + b"}")


@fuzz_settings(scale=2)
@given(raw=st.binary(max_size=64))
def test_arbitrary_bytes_parse_or_are_1000_never_another_exception(raw):
    try:
        body = parse_flat_json_object(raw)
    except ApiError as error:
        assert error.error is ErrorCode.INVALID_REQUEST
    else:
        assert isinstance(body, dict)
        assert all(v is None or isinstance(v, (str, int)) for v in body.values())
