"""Raw bodies the schema cannot describe: random bytes and text, JSON of every shape, deep nesting, signed bodies
mutated byte by byte, any content type, any method, any path under /openapi/v1/. Never a 5xx; always the envelope;
1000 whenever the body is not a JSON object of flat values (docs/api.md, "Checks, in order"), whatever else is wrong
with it."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.common import signing
from tests.fuzz.conftest import fuzz_settings
from tests.fuzz.oracle import assert_envelope, is_flat_signable

SIGNED_PATHS = ["/openapi/v1/balance", "/openapi/v1/pay/create", "/openapi/v1/pay/query",
                "/openapi/v1/payout/create", "/openapi/v1/payout/query", "/openapi/v1/refund/create",
                "/openapi/v1/refund/query"]
CONTENT_TYPES = st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain", "",
                                 "application/x-www-form-urlencoded", "multipart/form-data; boundary=xyz",
                                 "multipart/form-data", "application/xml", "*/*", "application/json; charset=latin-1"])

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                         st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
# Texts with lone surrogates: valid Python str, valid JSON once escaped (\ud800), not UTF-8 encodable.
surrogate_text = st.text(st.characters(codec="utf-16"), min_size=1, max_size=6).filter(
    lambda text: not is_flat_signable({"x": text}))


def deep(depth: int, opener: str) -> bytes:
    return (opener * depth).encode()


def expected_refusal(raw: bytes) -> bool:
    """Independent oracle of the first of docs/api.md, "Checks, in order": True when the body is not a JSON object of
    flat values."""
    try:
        body = json.loads(raw.decode("utf-8"), parse_float=lambda _: float("nan"), parse_constant=lambda _: [])
    except (UnicodeDecodeError, ValueError, RecursionError):
        return True
    if not isinstance(body, dict):
        return True
    return not is_flat_signable({k: (v if not isinstance(v, float) else []) for k, v in body.items()})


def post_raw(client, path: str, raw: bytes, content_type: str):
    response = client.generic("POST", path, data=raw, content_type=content_type)
    return response.status_code, response.content


garbage = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(lambda text: text.encode("utf-8")),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.dictionaries(st.text(max_size=10), json_values, max_size=6).map(lambda value: json.dumps(value).encode()),
    st.builds(deep, st.integers(1, 120_000), st.sampled_from(["[", '{"a":', "[{\"b\":"])),
)


@fuzz_settings(scale=3)
@given(raw=garbage, path=st.sampled_from(SIGNED_PATHS), content_type=CONTENT_TYPES)
def test_garbage_bodies_are_1000_or_refused_by_the_signature_layer(client, merchant, raw, path, content_type):
    status, content = post_raw(client, path, raw, content_type)
    body = assert_envelope(status, content, (path, raw[:200]))
    if expected_refusal(raw):
        assert (status, body["code"]) == (400, "1000"), (body, raw[:200])
    else:
        assert body["code"] != "0", "an unsigned body was accepted"


def mutate(raw: bytes, data) -> bytes:
    how = data.draw(st.sampled_from(["delete", "insert", "replace", "truncate", "surrogate", "duplicate-key"]))
    at = data.draw(st.integers(0, len(raw) - 1))
    if how == "delete":
        return raw[:at] + raw[at + data.draw(st.integers(1, 8)):]
    if how == "insert":
        return raw[:at] + data.draw(st.binary(min_size=1, max_size=8)) + raw[at:]
    if how == "replace":
        return raw[:at] + bytes([data.draw(st.integers(0, 255))]) + raw[at + 1:]
    if how == "truncate":
        return raw[:at]
    if how == "surrogate":  # a JSON escape that decodes to a lone surrogate, inside a value
        return raw.replace(b'"PHP"', b'"PHP\\ud800"', 1) if b'"PHP"' in raw else raw[:-1] + b', "x": "\\udfff"}'
    return raw[:-1] + b', "amount": 1}'  # a duplicate key: the last one wins in the parser


@fuzz_settings(scale=2)
@given(path=st.sampled_from(SIGNED_PATHS), data=st.data())
def test_signed_bodies_mutated_byte_by_byte_never_break_the_envelope(client, merchant, settings, path, data):
    settings.RATE_LIMIT_PER_SECOND = 1_000_000
    business = {"currency": "PHP", "mch_order_no": "FZ-1", "product_code": "PHP_PAYOUT", "amount": 10_000,
                "payee_name": "Juan", "payee_account": "0012345678", "bank_code": "BDO"}
    original = json.dumps(merchant.signed_body(business), ensure_ascii=data.draw(st.booleans())).encode()
    raw = mutate(original, data)
    status, content = post_raw(client, path, raw, "application/json")
    body = assert_envelope(status, content, (path, raw))
    if expected_refusal(raw):
        assert body["code"] == "1000", (body, raw)
    elif body["code"] == "0":
        # Only a body whose string to sign is unchanged may still pass (whitespace, key order, ...).
        parsed = json.loads(raw)
        assert signing.verify(merchant.private_key.public_key(), parsed, parsed.get("sign", "")), raw


METHODS = st.sampled_from(["GET", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "PROPFIND"])
unknown_suffixes = st.text(st.sampled_from("abcxyz019_-./"), max_size=30).filter(
    lambda suffix: suffix.rstrip("/") not in {p.rsplit("/v1/", 1)[1] for p in SIGNED_PATHS}
    and not suffix.startswith("schema/"))


@fuzz_settings()
@given(path=st.sampled_from(SIGNED_PATHS), method=METHODS, raw=garbage)
def test_other_methods_on_signed_endpoints_are_1004_405_whatever_the_body(client, db, path, method, raw):
    response = client.generic(method, path, data=raw, content_type="application/json")
    body = assert_envelope(response.status_code, response.content, (method, path))
    assert (response.status_code, body["code"]) == (405, "1004"), body


@fuzz_settings()
@given(suffix=unknown_suffixes, method=st.sampled_from(["POST", "GET", "PUT"]), raw=garbage)
def test_unknown_paths_under_the_api_root_are_1004_404_whatever_the_body(client, db, suffix, method, raw):
    response = client.generic(method, "/openapi/v1/" + suffix, data=raw, content_type="application/json")
    body = assert_envelope(response.status_code, response.content, suffix)
    assert (response.status_code, body["code"]) == (404, "1004"), (suffix, body)


@pytest.mark.parametrize("raw", [b"[" * 100_000, b'{"a":' * 50_000, b'{"a": ' + b"[" * 100_000])
def test_deeply_nested_json_is_1000_not_a_server_error(client, db, raw):
    """Found by test_garbage_bodies_...: json.loads raised RecursionError, which the parser did not catch (500)."""
    status, content = post_raw(client, "/openapi/v1/balance", raw, "application/json")
    assert (status, json.loads(content)["code"]) == (400, "1000")


@pytest.mark.parametrize("where", ["value", "key"])
def test_lone_surrogate_escape_in_a_signed_body_is_1000_not_a_server_error(client, merchant, where):
    """Found by the Schemathesis run: a JSON \\ud800 escape decodes to a str UTF-8 cannot encode; building the
    string to sign raised UnicodeEncodeError (500). Not valid Unicode text, so not valid JSON text: 1000."""
    raw = json.dumps(merchant.signed_body({"currency": "PHP"})).encode()
    extra = b', "subject": "a\\ud800b"}' if where == "value" else b', "\\udfff": "1"}'
    status, content = post_raw(client, "/openapi/v1/balance", raw[:-1] + extra, "application/json")
    assert (status, json.loads(content)["code"]) == (400, "1000")
