"""Every check of docs/api.md, "Checks, in order", failing on its own, in that order, with code, HTTP status and
envelope."""

import dataclasses
import json
import time

import pytest
import time_machine
from django.test import override_settings

from apps.common import signing
from apps.merchants.models import App, Merchant
from apps.merchants.services import merchant_key_add, merchant_key_revoke
from tests.helpers import assert_error, assert_ok, post_json, signed_post

BALANCE = "/openapi/v1/balance"


def resign(ctx, body: dict) -> dict:
    """Sign a body built by hand (a field removed or retyped), as a careless client would."""
    body = {k: v for k, v in body.items() if k != "sign"}
    body["sign"] = signing.sign(ctx.private_key, body)
    return body


def without(body: dict, field: str) -> dict:
    return {k: v for k, v in body.items() if k != field}


# --- 1000: the body is a JSON object of flat values -------------------------------------------------------------

@pytest.mark.parametrize("raw", [b'{"currency": "PHP",', b"not json", b"\xff\xfe{}", b'{"a": NaN}', b""])
def test_malformed_or_empty_body_is_1000(client, merchant, raw):
    assert_error(post_json(client, BALANCE, raw), "1000", 400)


@pytest.mark.parametrize("raw", [b"[]", b'[{"sign": "x"}]', b'"a string"', b"42", b"null", b"true"])
def test_body_that_is_not_an_object_is_1000(client, merchant, raw):
    assert_error(post_json(client, BALANCE, raw), "1000", 400)


@pytest.mark.parametrize("value", [{"nested": 1}, [1, 2], []])
def test_object_or_array_value_is_1000_even_when_otherwise_signed(client, merchant, value):
    body = merchant.signed_body({"currency": "PHP"})
    body["extra"] = value
    assert_error(post_json(client, BALANCE, body), "1000", 400)


@pytest.mark.parametrize("number", ["1.5", "1e3", "100.0"])
def test_non_integer_number_is_1000(client, merchant, number):
    body = merchant.signed_body({"currency": "PHP"})
    raw = json.dumps(body)[:-1] + f', "amount": {number}}}'
    assert_error(post_json(client, BALANCE, raw.encode()), "1000", 400)


# --- 1101: sign and sign_type ------------------------------------------------------------------------------------

def test_missing_sign_is_1101(client, merchant):
    assert_error(post_json(client, BALANCE, without(merchant.signed_body({}), "sign")), "1101", 401)


@pytest.mark.parametrize("sign", ["", None, 12345])
def test_empty_null_or_non_string_sign_is_1101(client, merchant, sign):
    assert_error(post_json(client, BALANCE, {**merchant.signed_body({}), "sign": sign}), "1101", 401)


@pytest.mark.parametrize("sign_type", ["RSA", "rsa2", "HMAC-SHA256", "", None])
def test_sign_type_other_than_rsa2_is_1101(client, merchant, sign_type):
    assert_error(post_json(client, BALANCE, merchant.signed_body({}, sign_type=sign_type)), "1101", 401)


def test_missing_sign_type_is_1101(client, merchant):
    body = resign(merchant, without(merchant.signed_body({}), "sign_type"))
    assert_error(post_json(client, BALANCE, body), "1101", 401)


# --- 1000: the other common fields present and well typed ---------------------------------------------------------

@pytest.mark.parametrize("field", ["merchant_no", "app_id", "key_version", "timestamp", "nonce"])
def test_missing_common_field_is_1000_naming_it(client, merchant, field):
    status, body = post_json(client, BALANCE, resign(merchant, without(merchant.signed_body({}), field)))
    assert_error((status, body), "1000", 400)
    assert field in body["msg"]


@pytest.mark.parametrize(("field", "value"), [
    ("merchant_no", 10000001), ("app_id", True), ("merchant_no", "M 1"),
    ("key_version", "1"), ("key_version", True), ("key_version", 1.0),
    # A fixed id: the value is the time of collection, which differs between xdist workers (their collections
    # must be the same) and between runs.
    pytest.param("timestamp", str(int(time.time())), id="timestamp-digits-as-string"), ("timestamp", False),
    ("nonce", "short7_"), ("nonce", "n" * 65), ("nonce", "has space"), ("nonce", "bad!chars"), ("nonce", 12345678),
])
def test_ill_typed_or_ill_formed_common_field_is_1000(client, merchant, field, value):
    body = merchant.signed_body({})
    body[field] = value
    if not isinstance(value, float):
        body = resign(merchant, body)  # a correct signature over the wrong type still fails the format check
    status, envelope = post_json(client, BALANCE, body)
    assert_error((status, envelope), "1000", 400)
    assert field in envelope["msg"] or "number" in envelope["msg"].lower()


@pytest.mark.parametrize("field", ["merchant_no", "app_id", "nonce"])
@pytest.mark.parametrize("pad", ["{}\n", " {}", "{} ", "{}\r\n"])
def test_common_field_padded_by_whitespace_or_final_newline_is_1000_not_trimmed(client, merchant, field, pad):
    # A correct signature over the padded value: the format check, not the signature, refuses it.
    body = merchant.signed_body({})
    body[field] = pad.format(body[field])
    status, envelope = post_json(client, BALANCE, resign(merchant, body))
    assert_error((status, envelope), "1000", 400)
    assert field in envelope["msg"]


@pytest.mark.parametrize("nonce", ["A" * 8, "z" * 64, "a-b_C-9_"])
def test_nonce_of_8_to_64_allowed_characters_is_accepted(client, merchant, nonce):
    assert_ok(signed_post(client, merchant, BALANCE, {}, nonce=nonce))


# --- 1104 / 1105: merchant, app and key version -------------------------------------------------------------------

def test_unknown_merchant_is_1104(client, merchant):
    assert_error(signed_post(client, merchant, BALANCE, {}, merchant_no="M99999999"), "1104", 401)


def test_app_of_another_merchant_is_1104(client, merchant, other_merchant):
    assert_error(signed_post(client, merchant, BALANCE, {}, app_id=other_merchant.app_id), "1104", 401)


@pytest.mark.parametrize("key_version", [2, 0, -1, 10**20])
def test_unknown_key_version_is_1104(client, merchant, key_version):
    assert_error(signed_post(client, merchant, BALANCE, {}, key_version=key_version), "1104", 401)


def test_revoked_key_is_1104(client, merchant):
    merchant_key_revoke(merchant_no=merchant.merchant_no, key_version=1)
    assert_error(signed_post(client, merchant, BALANCE, {}), "1104", 401)


def test_disabled_merchant_is_1105(client, merchant):
    Merchant.objects.filter(merchant_no=merchant.merchant_no).update(is_active=False)
    assert_error(signed_post(client, merchant, BALANCE, {}), "1105", 403)


def test_disabled_app_is_1105(client, merchant):
    App.objects.filter(app_id=merchant.app_id).update(is_active=False)
    assert_error(signed_post(client, merchant, BALANCE, {}), "1105", 403)


# --- 1102: timestamp ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("offset", [-301, 301, -86400, 10**12])
def test_timestamp_outside_300_seconds_either_way_is_1102(client, merchant, offset):
    # The clock stands still from signing to the check: on a busy machine (the suite's parallel workers) more than a
    # second passed in between, and a body signed 301 s ahead arrived 300 s ahead, inside the tolerance.
    with time_machine.travel(int(time.time()), tick=False):
        assert_error(signed_post(client, merchant, BALANCE, {}, timestamp=int(time.time()) + offset), "1102", 401)


@pytest.mark.parametrize("offset", [-290, 290])
def test_timestamp_within_tolerance_either_way_is_accepted(client, merchant, offset):
    assert_ok(signed_post(client, merchant, BALANCE, {}, timestamp=int(time.time()) + offset))


# --- 1101: signature ----------------------------------------------------------------------------------------------

def test_signature_from_another_key_is_1101(client, merchant, rsa_keys):
    forger = dataclasses.replace(merchant, private_key=rsa_keys[1])
    assert_error(signed_post(client, forger, BALANCE, {}), "1101", 401)


def test_body_changed_after_signing_is_1101(client, merchant):
    body = merchant.signed_body({"currency": "PHP"})
    body["currency"] = "USD"
    assert_error(post_json(client, BALANCE, body), "1101", 401)


def test_sign_that_is_not_base64_is_1101(client, merchant):
    assert_error(post_json(client, BALANCE, {**merchant.signed_body({}), "sign": "not*base64"}), "1101", 401)


# --- 1103: nonce replay -------------------------------------------------------------------------------------------

def test_reused_nonce_is_1103(client, merchant):
    body = merchant.signed_body({})
    assert_ok(post_json(client, BALANCE, body))
    assert_error(post_json(client, BALANCE, body), "1103", 401)
    assert_error(signed_post(client, merchant, BALANCE, {"currency": "USD"}, nonce=body["nonce"]), "1103", 401)


def test_request_with_a_failed_signature_does_not_burn_its_nonce(client, merchant, rsa_keys):
    forged = dataclasses.replace(merchant, private_key=rsa_keys[1]).signed_body({}, nonce="victim-nonce-1")
    assert_error(post_json(client, BALANCE, forged), "1101", 401)
    assert_ok(signed_post(client, merchant, BALANCE, {}, nonce="victim-nonce-1"))


def test_nonce_is_per_merchant(client, merchant, other_merchant):
    assert_ok(signed_post(client, merchant, BALANCE, {}, nonce="shared-nonce-01"))
    assert_ok(signed_post(client, other_merchant, BALANCE, {}, nonce="shared-nonce-01"))


# --- key rotation -------------------------------------------------------------------------------------------------

def test_key_rotation_both_versions_verify_until_the_old_one_is_revoked(client, merchant, rsa_keys):
    key = merchant_key_add(merchant_no=merchant.merchant_no,
                           public_key_pem=signing.public_key_to_pem(rsa_keys[2].public_key()))
    assert key.version == 2
    v2 = dataclasses.replace(merchant, key_version=2, private_key=rsa_keys[2])
    assert_ok(signed_post(client, merchant, BALANCE, {}))
    assert_ok(signed_post(client, v2, BALANCE, {}))
    # Each version verifies only with its own key.
    assert_error(signed_post(client, dataclasses.replace(v2, key_version=1), BALANCE, {}), "1101", 401)

    merchant_key_revoke(merchant_no=merchant.merchant_no, key_version=1)
    assert_error(signed_post(client, merchant, BALANCE, {}), "1104", 401)
    assert_ok(signed_post(client, v2, BALANCE, {}))


# --- 1106: rate limit ---------------------------------------------------------------------------------------------

@override_settings(RATE_LIMIT_PER_SECOND=3)
def test_over_the_rate_limit_is_1106_and_429(client, merchant):
    with time_machine.travel(time.time(), tick=False):  # one fixed one-second window
        for _ in range(3):
            assert_ok(signed_post(client, merchant, BALANCE, {}))
        assert_error(signed_post(client, merchant, BALANCE, {}), "1106", 429)


@override_settings(RATE_LIMIT_PER_SECOND=2)
def test_rate_limit_is_per_merchant_and_forgeries_do_not_spend_it(client, merchant, other_merchant, rsa_keys):
    forger = dataclasses.replace(merchant, private_key=rsa_keys[2])
    with time_machine.travel(time.time(), tick=False):
        for _ in range(5):
            assert_error(signed_post(client, forger, BALANCE, {}), "1101", 401)
        for _ in range(2):
            assert_ok(signed_post(client, merchant, BALANCE, {}))
        assert_error(signed_post(client, merchant, BALANCE, {}), "1106", 429)
        assert_ok(signed_post(client, other_merchant, BALANCE, {}))


def test_rate_limited_request_does_not_burn_its_nonce(client, merchant, settings):
    settings.RATE_LIMIT_PER_SECOND = 1
    with time_machine.travel(time.time(), tick=False) as traveller:
        assert_ok(signed_post(client, merchant, BALANCE, {}))
        body = merchant.signed_body({})
        assert_error(post_json(client, BALANCE, body), "1106", 429)
        traveller.shift(1.0)  # the next one-second window
        assert_ok(post_json(client, BALANCE, body))


# --- 1004: routing comes first ------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/openapi/v1/nope", "/openapi/v1/balance/", "/openapi/v1/", "/openapi/v1",
                                  "/openapi/v1/pay/nope/deeper"])
@pytest.mark.parametrize("raw", [b"not json", b'{"sign": "x"}'])
def test_unknown_path_under_openapi_v1_is_1004_404_whatever_the_body(client, path, raw):
    assert_error(post_json(client, path, raw), "1004", 404)


def test_unknown_path_with_get_is_1004_404(client):
    response = client.get("/openapi/v1/does-not-exist")
    assert_error((response.status_code, response.json()), "1004", 404)


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete", "options"])
def test_method_the_endpoint_does_not_take_is_1004_405_whatever_the_body(client, merchant, method):
    response = client.generic(method.upper(), BALANCE, data=json.dumps(merchant.signed_body({})),
                              content_type="application/json")
    assert_error((response.status_code, response.json()), "1004", 405)


@pytest.mark.parametrize("accept", ["text/html", "application/xml", "text/html;q=0.9, */*;q=0.1", "nonsense"])
def test_any_accept_header_gets_the_json_envelope(client, merchant, accept):
    response = client.post(BALANCE, data=json.dumps(merchant.signed_body({"currency": "PHP"})),
                           content_type="application/json", HTTP_ACCEPT=accept)
    assert response["Content-Type"] == "application/json"
    assert_ok((response.status_code, response.json()))
    forged = {**merchant.signed_body({"currency": "PHP"}), "sign": "Zm9yZ2Vk"}
    refused = client.post(BALANCE, data=json.dumps(forged), content_type="application/json", HTTP_ACCEPT=accept)
    assert refused["Content-Type"] == "application/json"
    assert_error((refused.status_code, refused.json()), "1101", 401)


# --- 9999: unhandled errors ---------------------------------------------------------------------------------------

def test_unhandled_exception_is_9999_500_envelope_without_internals(client, merchant, monkeypatch):
    def explode(**kwargs):
        raise RuntimeError("relation ledger_secret does not exist at SELECT password FROM")

    monkeypatch.setattr("apps.ledger.api.views.merchant_balances", explode)
    response = client.post(BALANCE, data=json.dumps(merchant.signed_body({})), content_type="application/json")
    assert_error((response.status_code, response.json()), "9999", 500)
    text = response.content.decode()
    assert "Traceback" not in text and "ledger_secret" not in text and "RuntimeError" not in text


# --- the contract's order when several checks fail at once --------------------------------------------------------

def test_checks_run_in_the_contracts_order(client, merchant, rsa_keys):
    now = int(time.time())
    forger = dataclasses.replace(merchant, private_key=rsa_keys[1])
    # format of the body before anything about the signature
    body = merchant.signed_body({})
    body.pop("sign")
    body["x"] = [1]
    assert_error(post_json(client, BALANCE, body), "1000", 400)
    # sign/sign_type before the other common fields
    assert_error(post_json(client, BALANCE, without(merchant.signed_body({}, nonce="bad"), "sign")), "1101", 401)
    assert_error(signed_post(client, merchant, BALANCE, {}, sign_type="RSA", merchant_no="M0"), "1101", 401)
    # common field formats before the merchant lookup
    assert_error(signed_post(client, merchant, BALANCE, {}, merchant_no="M99999999", nonce="bad"), "1000", 400)
    # merchant/app/key before the timestamp
    assert_error(signed_post(client, merchant, BALANCE, {}, merchant_no="M99999999", timestamp=now - 9999), "1104", 401)
    Merchant.objects.filter(merchant_no=merchant.merchant_no).update(is_active=False)
    assert_error(signed_post(client, merchant, BALANCE, {}, timestamp=now - 9999), "1105", 403)
    Merchant.objects.filter(merchant_no=merchant.merchant_no).update(is_active=True)
    # timestamp before the signature
    assert_error(signed_post(client, forger, BALANCE, {}, timestamp=now + 9999), "1102", 401)
    # signature before the nonce
    used = merchant.signed_body({})
    assert_ok(post_json(client, BALANCE, used))
    assert_error(signed_post(client, forger, BALANCE, {}, nonce=used["nonce"]), "1101", 401)
    # nonce before business validation
    assert_error(signed_post(client, merchant, BALANCE, {"currency": "XXX"}, nonce=used["nonce"]), "1103", 401)


@pytest.mark.parametrize("offset", [-300, 300])
def test_timestamp_exactly_300_seconds_off_is_accepted(client, merchant, offset):
    with time_machine.travel(time.time(), tick=False):
        assert_ok(signed_post(client, merchant, BALANCE, {}, timestamp=int(time.time()) + offset))


def test_request_serializers_bind_their_own_field_copies_and_keep_errors_apart():
    # RequestSerializer copies the declared fields shallowly per instance (apps/common/api/serializers.py):
    # two requests validated side by side must not share bound fields or errors.
    from apps.payout.api.serializers import PayoutCreateRequestSerializer

    good = PayoutCreateRequestSerializer(data={"mch_order_no": "m1", "product_code": "PHP_PAYOUT", "amount": 100,
                                               "currency": "PHP", "payee_name": "A", "payee_account": "1",
                                               "bank_code": "BDO"})
    bad = PayoutCreateRequestSerializer(data={"mch_order_no": "m 1", "product_code": "PHP_PAYOUT", "amount": "100",
                                              "currency": "PHP", "payee_name": "A", "payee_account": "1",
                                              "bank_code": "BDO"})
    assert bad.fields["amount"] is not good.fields["amount"]
    assert bad.fields["amount"].parent is bad and good.fields["amount"].parent is good
    assert PayoutCreateRequestSerializer._declared_fields["amount"].parent is None  # the class's own stay unbound
    assert not bad.is_valid() and good.is_valid(), good.errors
    assert set(bad.errors) == {"mch_order_no", "amount"}
    assert good.validated_data["amount"] == 100


# --- balance: currency is checked as sent (docs/api.md, "Field formats") ----------------------------------------

@pytest.mark.parametrize("currency", ["PHP\n", " PHP", "PHP ", "\tUSD", "USD\r\n"])
def test_balance_currency_padded_by_whitespace_or_final_newline_is_1000_not_trimmed(client, merchant, currency):
    status, body = signed_post(client, merchant, BALANCE, {"currency": currency})
    assert_error((status, body), "1000", 400)
    assert "currency" in body["msg"]
