"""POST /openapi/v1/balance and GET /currencies (docs/api.md, "Endpoints")."""

from django.db import transaction

from apps.ledger.models import AccountKind, LedgerAccount
from apps.ledger.services import balance_adjust, hold_place
from tests.helpers import assert_error, assert_ok, signed_post

BALANCE = "/openapi/v1/balance"


def test_balance_defaults_to_php(client, merchant):
    assert assert_ok(signed_post(client, merchant, BALANCE, {})) == {"currency": "PHP", "available": 0, "settling": 0}


def test_balance_of_an_enabled_currency(client, merchant):
    balance_adjust(merchant_no=merchant.merchant_no, currency="USD", amount=12345, reason="test credit")
    assert assert_ok(signed_post(client, merchant, BALANCE, {"currency": "USD"})) == {
        "currency": "USD", "available": 12345, "settling": 0}


def test_balance_of_a_known_currency_the_merchant_never_used_is_zero(client, merchant):
    assert assert_ok(signed_post(client, merchant, BALANCE, {"currency": "JPY"})) == {
        "currency": "JPY", "available": 0, "settling": 0}


def test_balance_with_unknown_currency_is_1001_422(client, merchant):
    assert_error(signed_post(client, merchant, BALANCE, {"currency": "XXX"}), "1001", 422)


def test_balance_with_lower_case_currency_is_a_1000_format_error(client, merchant):
    # Decision (docs/api.md): currency codes are 3 upper-case letters; "php" is a format error, not unknown.
    status, body = signed_post(client, merchant, BALANCE, {"currency": "php"})
    assert_error((status, body), "1000", 400)
    assert "currency" in body["msg"]


def test_balance_with_non_string_currency_is_1000(client, merchant):
    assert_error(signed_post(client, merchant, BALANCE, {"currency": 608}), "1000", 400)


def test_balance_with_empty_currency_is_the_default(client, merchant):
    assert assert_ok(signed_post(client, merchant, BALANCE, {"currency": ""}))["currency"] == "PHP"


def test_balance_never_shows_frozen_and_held_money_leaves_available(client, merchant):
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=10_000, reason="test credit")
    with transaction.atomic():
        hold_place(merchant_id=merchant.merchant.pk, currency="PHP", amount=3_000, cause="test-hold-1")
    assert LedgerAccount.objects.get(merchant=merchant.merchant, currency="PHP", kind=AccountKind.FROZEN).balance == 3000

    data = assert_ok(signed_post(client, merchant, BALANCE, {"currency": "PHP"}))
    assert data == {"currency": "PHP", "available": 7_000, "settling": 0}
    assert "frozen" not in data


def test_balance_shows_only_the_signing_merchants_money(client, merchant, other_merchant):
    balance_adjust(merchant_no=other_merchant.merchant_no, currency="PHP", amount=500, reason="other's money")
    assert assert_ok(signed_post(client, merchant, BALANCE, {}))["available"] == 0
    assert assert_ok(signed_post(client, other_merchant, BALANCE, {}))["available"] == 500


def test_currencies_is_public_and_in_the_envelope_with_iso_minor_units(client, bootstrapped):
    response = client.get("/currencies")
    assert response.status_code == 200
    body = response.json()
    assert (body["code"], body["msg"]) == ("0", "OK")
    items = {item["code"]: item for item in body["data"]["items"]}
    assert {code: items[code]["minor_unit"] for code in ("PHP", "USD", "IDR", "VND", "JPY", "KWD")} == {
        "PHP": 2, "USD": 2, "IDR": 2, "VND": 0, "JPY": 0, "KWD": 3}
    assert all(set(item) == {"code", "name", "symbol", "minor_unit", "active"} for item in items.values())
    assert items["PHP"]["name"] == "Philippine Peso" and items["PHP"]["symbol"] == "₱"
    assert items["USD"]["symbol"] == "$" and items["USD"]["active"] is True


def test_currencies_ignores_any_signature_fields_and_needs_no_body(client, bootstrapped):
    response = client.get("/currencies", {"merchant_no": "M0", "sign": "garbage"})
    assert response.status_code == 200 and response.json()["code"] == "0"


def test_currencies_shows_an_inactive_currency_as_inactive(client, bootstrapped):
    from apps.currencies.models import Currency

    Currency.objects.filter(code="KWD").update(active=False)
    items = {item["code"]: item for item in client.get("/currencies").json()["data"]["items"]}
    assert items["KWD"]["active"] is False


def test_post_to_currencies_is_an_enveloped_405(client, bootstrapped):
    response = client.post("/currencies", data="{}", content_type="application/json")
    assert response.status_code == 405
    assert response.json() == {"code": "1004", "msg": "This endpoint does not take that method.", "data": None}
