"""POST /openapi/v1/pay/create: response shape, formats (1000), replay/2001, 1001, 1002, 1003 (docs/api.md, "Checks,
in order", "Idempotent create")."""

import pytest

from apps.channels.models import Channel
from apps.collection.models import CollectionOrder
from apps.currencies.models import Currency
from apps.ledger.models import Posting
from apps.merchants.models import MerchantCurrency, MerchantProduct, Product
from tests.collection.conftest import CREATE, balances, create, order_params
from tests.helpers import signed_post

pytestmark = pytest.mark.django_db


def test_create_returns_created_order_with_pay_url_and_expiry(client, merchant, settings):
    status, body = create(client, merchant, mch_order_no="A-1", amount=12345, expire_seconds=900)
    assert (status, body["code"], body["msg"]) == (200, "0", "OK")
    data = body["data"]
    order = CollectionOrder.objects.get(platform_order_no=data["platform_order_no"])
    assert set(data) == {"platform_order_no", "mch_order_no", "pay_url", "amount", "currency", "expire_at", "status"}
    assert data["mch_order_no"] == "A-1" and data["amount"] == 12345 and data["currency"] == "PHP"
    assert data["status"] == "CREATED"
    assert data["pay_url"] == f"{settings.PAY_BASE_URL}/pay/{order.pay_token}"
    assert data["expire_at"] == int(order.expire_at.timestamp())
    assert 899 <= (order.expire_at - order.created_at).total_seconds() <= 901
    assert order.merchant_id == merchant.merchant.pk and order.settlement == "D1"


def test_platform_order_no_and_pay_token_are_random_alphanumeric(client, merchant):
    first, second = (create(client, merchant)[1]["data"] for _ in range(2))
    for data in (first, second):
        assert data["platform_order_no"].isalnum() and len(data["platform_order_no"]) <= 64
        token = data["pay_url"].rsplit("/", 1)[1]
        assert len(token) >= 22  # >= 128 bits of base64url
        assert data["platform_order_no"] not in data["pay_url"]
    assert first["platform_order_no"][-16:] != second["platform_order_no"][-16:]
    assert first["pay_url"] != second["pay_url"]


def test_create_defaults_expire_seconds_to_600(client, merchant):
    status, body = create(client, merchant)
    order = CollectionOrder.objects.get(platform_order_no=body["data"]["platform_order_no"])
    assert order.expire_seconds == 600
    assert 599 <= (order.expire_at - order.created_at).total_seconds() <= 601


@pytest.mark.parametrize("field, value", [
    ("mch_order_no", "has space"),
    ("mch_order_no", "x" * 65),
    ("mch_order_no", "ünïcode"),
    ("mch_order_no", 123),
    ("amount", 0),
    ("amount", -5),
    ("amount", 2**53),
    ("amount", "100"),
    ("amount", True),
    ("subject", "s" * 257),
    ("attach", "a" * 513),
    ("return_url", "ftp://example.com/x"),
    ("return_url", "javascript:alert(1)"),
    ("return_url", "https://example.com/" + "p" * 500),
    ("return_url", "not a url"),
    ("expire_seconds", 59),
    ("expire_seconds", 86401),
    ("expire_seconds", "600"),
    ("product_code", 7),
    ("currency", 1),
])
def test_create_with_field_out_of_format_returns_1000(client, merchant, field, value):
    status, body = create(client, merchant, **{field: value})
    assert (status, body["code"], body["data"]) == (400, "1000", None)
    assert field in body["msg"]
    assert not CollectionOrder.objects.exists()


@pytest.mark.parametrize("missing", ["mch_order_no", "product_code", "amount", "currency"])
def test_create_without_required_field_returns_1000(client, merchant, missing):
    params = order_params()
    del params[missing]
    status, body = signed_post(client, merchant, CREATE, params)
    assert (status, body["code"]) == (400, "1000")
    assert missing in body["msg"]


def test_create_accepts_bounds_of_formats(client, merchant):
    status, body = create(client, merchant, mch_order_no="A_b-9" + "x" * 59, subject="s" * 256, attach="a" * 512,
                          return_url="https://shop.example/back?x=1", expire_seconds=86400)
    assert (status, body["code"]) == (200, "0")
    status, body = create(client, merchant, expire_seconds=60, return_url="http://shop.example")
    assert (status, body["code"]) == (200, "0")


# The formats of docs/api.md, "Field formats" hold on the value as sent: nothing is trimmed, and "$" before a final
# newline is no end.
@pytest.mark.parametrize("field, value", [
    ("mch_order_no", "ORD-WS\n"), ("mch_order_no", " ORD-WS "), ("mch_order_no", "ORD-WS "),
    ("mch_order_no", "\tORD-WS"), ("mch_order_no", "ORD-WS\r\n"),
    ("currency", "PHP\n"), ("currency", " PHP"), ("currency", "PHP "),
    ("product_code", "PHP_COLLECT_D1\n"), ("product_code", " PHP_COLLECT_D1"),
    ("return_url", "https://shop.example/back\n"), ("return_url", " https://shop.example/back"),
])
def test_create_with_surrounding_whitespace_or_final_newline_returns_1000(client, merchant, field, value):
    status, body = create(client, merchant, **{field: value})
    assert (status, body["code"], body["data"]) == (400, "1000", None), body
    assert field in body["msg"]
    assert not CollectionOrder.objects.exists()


def test_mch_order_no_with_a_final_newline_is_not_a_replay_of_the_bare_one(client, merchant):
    first = create(client, merchant, mch_order_no="NL-1")[1]["data"]
    status, body = create(client, merchant, mch_order_no="NL-1\n")
    assert (status, body["code"]) == (400, "1000"), body
    assert list(CollectionOrder.objects.values_list("platform_order_no", "mch_order_no")) == [
        (first["platform_order_no"], "NL-1")]


def test_format_error_comes_before_duplicate_check(client, merchant):
    create(client, merchant, mch_order_no="DUP-F")
    status, body = create(client, merchant, mch_order_no="DUP-F", expire_seconds=10)
    assert (status, body["code"]) == (400, "1000")


# ----------------------------------------------------------------------------------------- replay / 2001

def test_identical_create_replays_original_order_and_moves_no_money(client, merchant):
    params = dict(mch_order_no="R-1", amount=5000, subject="Coffee", attach="x=1", return_url="https://s.example/r")
    first = create(client, merchant, **params)[1]
    status, again = create(client, merchant, **params)
    assert (status, again["code"]) == (200, "0")
    assert again["data"] == first["data"]
    assert CollectionOrder.objects.filter(mch_order_no="R-1").count() == 1
    assert not Posting.objects.exists() and balances(merchant) == {"available": 0, "settling": 0, "frozen": 0}


@pytest.mark.django_db(transaction=True)
def test_create_is_one_insert_committed_by_itself_and_a_replay_still_answers(client, merchant):
    """No money moves at create, so its one INSERT commits by itself (no BEGIN, no COMMIT statement); the
    replay that follows a unique conflict still finds the connection usable and answers with the order."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        status, first = create(client, merchant, mch_order_no="R-9")
    assert (status, first["code"]) == (200, "0")
    statements = [q["sql"] for q in queries.captured_queries]
    assert not [sql for sql in statements if sql in ("BEGIN", "COMMIT") or "SAVEPOINT" in sql], statements
    assert [sql.split(" (")[0] for sql in statements if sql.startswith("INSERT")] == \
        ['INSERT INTO "collection_collectionorder"'], statements
    status, again = create(client, merchant, mch_order_no="R-9")
    assert (status, again["code"], again["data"]) == (200, "0", first["data"])
    status, different = create(client, merchant, mch_order_no="R-9", amount=7777)
    assert (status, different["code"]) == (409, "2001")
    assert CollectionOrder.objects.filter(mch_order_no="R-9").count() == 1


def test_replay_treats_empty_string_as_absent_and_600_as_default(client, merchant):
    first = create(client, merchant, mch_order_no="R-2")[1]["data"]
    status, again = create(client, merchant, mch_order_no="R-2", subject="", attach="", return_url="",
                           expire_seconds=600)
    assert (status, again["code"], again["data"]["platform_order_no"]) == (200, "0", first["platform_order_no"])


def test_replay_shows_current_status(client, merchant):
    from apps.collection.services import collection_notify_paid

    first = create(client, merchant, mch_order_no="R-3")[1]["data"]
    collection_notify_paid(platform_order_no=first["platform_order_no"])
    status, again = create(client, merchant, mch_order_no="R-3")
    assert (status, again["data"]["status"], again["data"]["platform_order_no"]) == \
        (200, "SUCCESS", first["platform_order_no"])
    assert Posting.objects.filter(kind="collection.success").count() == 1


@pytest.mark.parametrize("change", [
    {"amount": 10001}, {"currency": "USD", "product_code": "USD_COLLECT_D1"}, {"product_code": "PHP_COLLECT_D0"},
    {"subject": "other"}, {"return_url": "https://other.example"}, {"expire_seconds": 601}, {"attach": "other"},
])
def test_same_mch_order_no_with_different_params_returns_2001(client, merchant, change):
    create(client, merchant, mch_order_no="D-1")
    status, body = create(client, merchant, mch_order_no="D-1", **change)
    assert (status, body["code"], body["data"]) == (409, "2001", None)
    assert CollectionOrder.objects.filter(mch_order_no="D-1").count() == 1


def test_duplicate_check_comes_before_currency_product_and_amount(client, merchant):
    create(client, merchant, mch_order_no="D-2")
    status, body = create(client, merchant, mch_order_no="D-2", currency="EUR", product_code="NOPE", amount=1)
    assert (status, body["code"]) == (409, "2001")


def test_same_mch_order_no_of_another_merchant_is_a_new_order(client, merchant, other_merchant):
    mine = create(client, merchant, mch_order_no="SHARED")[1]["data"]
    status, theirs = create(client, other_merchant, mch_order_no="SHARED", amount=777)
    assert (status, theirs["code"]) == (200, "0")
    assert theirs["data"]["platform_order_no"] != mine["platform_order_no"]


# ----------------------------------------------------------------------------------------- 1001

def test_currency_not_enabled_for_merchant_returns_1001(client, other_merchant):
    status, body = create(client, other_merchant, currency="USD", product_code="USD_COLLECT_D1")
    assert (status, body["code"], body["data"]) == (422, "1001", None)


@pytest.mark.parametrize("currency", ["XXX", "php", "PESO"])
def test_unknown_currency_returns_1001(client, merchant, currency):
    status, body = create(client, merchant, currency=currency)
    assert (status, body["code"]) == (422, "1001")


def test_currency_disabled_for_merchant_returns_1001(client, merchant):
    MerchantCurrency.objects.filter(merchant=merchant.merchant, currency_id="PHP").update(is_enabled=False)
    status, body = create(client, merchant)
    assert (status, body["code"]) == (422, "1001")


def test_inactive_currency_returns_1001(client, merchant):
    Currency.objects.filter(code="PHP").update(active=False)
    status, body = create(client, merchant)
    assert (status, body["code"]) == (422, "1001")
    assert "active" in body["msg"]


def test_currency_without_serving_payin_channel_returns_1001(client, merchant):
    Channel.objects.filter(currency_id="PHP", direction=Channel.Direction.PAYIN).update(is_active=False)
    status, body = create(client, merchant)
    assert (status, body["code"]) == (422, "1001")
    assert "channel" in body["msg"]


def test_currency_check_comes_before_product(client, other_merchant):
    status, body = create(client, other_merchant, currency="USD", product_code="NOPE")
    assert (status, body["code"]) == (422, "1001")


# ----------------------------------------------------------------------------------------- 1002

def test_unknown_product_returns_1002(client, merchant):
    status, body = create(client, merchant, product_code="NOPE")
    assert (status, body["code"], body["data"]) == (422, "1002", None)
    assert "product_code" in body["msg"]


def test_product_not_enabled_for_merchant_returns_1002(client, merchant):
    MerchantProduct.objects.filter(merchant=merchant.merchant, product__code="PHP_COLLECT_D1").update(is_enabled=False)
    status, body = create(client, merchant)
    assert (status, body["code"]) == (422, "1002")


def test_inactive_product_returns_1002(client, merchant):
    Product.objects.filter(code="PHP_COLLECT_D1").update(is_active=False)
    status, body = create(client, merchant)
    assert (status, body["code"]) == (422, "1002")


def test_product_of_another_merchant_only_returns_1002(client, merchant, other_merchant):
    product = Product.objects.create(code="VIP_COLLECT", kind="collection", currency_id="PHP", settlement="D0",
                                     min_amount=1, max_amount=10**9)
    MerchantProduct.objects.create(merchant=other_merchant.merchant, product=product)
    status, body = create(client, merchant, product_code="VIP_COLLECT")
    assert (status, body["code"]) == (422, "1002")


def test_payout_product_returns_1002(client, merchant):
    status, body = create(client, merchant, product_code="PHP_PAYOUT")
    assert (status, body["code"]) == (422, "1002")
    assert "collection" in body["msg"]


def test_product_of_other_currency_returns_1002(client, merchant):
    status, body = create(client, merchant, currency="PHP", product_code="USD_COLLECT_D1")
    assert (status, body["code"]) == (422, "1002")


def test_product_check_comes_before_amount(client, merchant):
    status, body = create(client, merchant, product_code="NOPE", amount=1)
    assert (status, body["code"]) == (422, "1002")


# ----------------------------------------------------------------------------------------- 1003

def test_amount_below_product_minimum_returns_1003(client, merchant):
    minimum = Product.objects.get(code="PHP_COLLECT_D1").min_amount
    status, body = create(client, merchant, amount=minimum - 1)
    assert (status, body["code"], body["data"]) == (422, "1003", None)
    assert (create(client, merchant, amount=minimum)[1]["code"]) == "0"


def test_amount_above_product_maximum_returns_1003(client, merchant):
    maximum = Product.objects.get(code="PHP_COLLECT_D1").max_amount
    status, body = create(client, merchant, amount=maximum + 1)
    assert (status, body["code"]) == (422, "1003")
    assert (create(client, merchant, amount=maximum)[1]["code"]) == "0"


def test_amount_not_above_fee_returns_1003(client, merchant):
    product = Product.objects.create(code="PHP_PRICEY", kind="collection", currency_id="PHP", settlement="D0",
                                     fee_fixed=500, min_amount=1, max_amount=10**6)
    MerchantProduct.objects.create(merchant=merchant.merchant, product=product)
    status, body = create(client, merchant, product_code="PHP_PRICEY", amount=500)
    assert (status, body["code"]) == (422, "1003")
    assert (create(client, merchant, product_code="PHP_PRICEY", amount=501)[1]["code"]) == "0"


def test_fee_is_computed_at_create_and_stored(client, merchant, fee_product):
    status, body = create(client, merchant, product_code="PHP_COLLECT_FEE", amount=10001)
    order = CollectionOrder.objects.get(platform_order_no=body["data"]["platform_order_no"])
    # 100 + ceil(10001 × 250 / 10000) = 100 + ceil(250.025) = 351
    assert order.fee == 351
    fee_product.fee_fixed = 0
    fee_product.save()
    order.refresh_from_db()
    assert order.fee == 351


def test_get_on_create_is_1004(client, merchant):
    response = client.get(CREATE)
    assert (response.status_code, response.json()["code"]) == (405, "1004")
