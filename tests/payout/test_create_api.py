"""POST /payout/create and /payout/query: formats, the validation order of docs/api.md, replay, scoping."""

import pytest
from django.db import IntegrityError, connection, transaction

from apps.channels.models import BankCode, Channel
from apps.currencies.models import Currency
from apps.ledger.models import Hold, Posting
from apps.merchants.models import MerchantProduct
from apps.payout.models import Payout
from tests.payout.conftest import PHP_FEE, balances, create, create_ok, fund, money_snapshot, payout_params, query

pytestmark = pytest.mark.django_db


def assert_refused(result, http: int, code: str, field: str | None = None):
    status, body = result
    assert (status, body["code"], body["data"]) == (http, code, None), body
    if field:
        assert field in body["msg"], body


# --- formats (1000) -------------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides, field", [
    ({"mch_order_no": None}, "mch_order_no"),
    ({"mch_order_no": "has space"}, "mch_order_no"),
    ({"mch_order_no": "x" * 65}, "mch_order_no"),
    ({"product_code": None}, "product_code"),
    ({"amount": None}, "amount"),
    ({"amount": "10000"}, "amount"),
    ({"amount": 0}, "amount"),
    ({"amount": -5}, "amount"),
    ({"amount": 2**53}, "amount"),
    ({"amount": True}, "amount"),
    ({"currency": None}, "currency"),
    ({"payee_name": None}, "payee_name"),
    ({"payee_name": "n" * 129}, "payee_name"),
    ({"payee_account": None}, "payee_account"),
    ({"payee_account": "0012-345678"}, "payee_account"),
    ({"payee_account": "0012 345678"}, "payee_account"),
    ({"payee_account": "9" * 65}, "payee_account"),
    ({"bank_code": None}, "bank_code"),
    ({"bank_code": 123}, "bank_code"),
    ({"attach": "a" * 513}, "attach"),
])
def test_payout_create_with_field_out_of_format_returns_1000(client, funded, overrides, field):
    assert_refused(create(client, funded, **overrides), 400, "1000", field)
    assert not Payout.objects.exists()


# The formats of docs/api.md, "Field formats" hold on the value as sent: nothing is trimmed, and "$" before a final
# newline is no end.
@pytest.mark.parametrize("field, value", [
    ("mch_order_no", "PO-WS\n"), ("mch_order_no", " PO-WS "), ("mch_order_no", "PO-WS "), ("mch_order_no", "\tPO-WS"),
    ("payee_account", "0012345678\n"), ("payee_account", " 0012345678"), ("payee_account", "0012345678 "),
    ("bank_code", "BDO\n"), ("bank_code", " BDO"), ("bank_code", "BDO "), ("bank_code", "B" * 33),
    ("currency", "PHP\n"), ("currency", " PHP"), ("currency", "PHP "),
    ("product_code", "PHP_PAYOUT\n"), ("product_code", " PHP_PAYOUT"),
])
def test_payout_create_with_surrounding_whitespace_or_final_newline_returns_1000(client, funded, field, value):
    before = money_snapshot(funded)
    assert_refused(create(client, funded, **{field: value}), 400, "1000", field)
    assert not Payout.objects.exists() and not Hold.objects.exists()
    assert money_snapshot(funded) == before


def test_payout_mch_order_no_with_a_final_newline_is_not_a_replay_of_the_bare_one(client, funded):
    payout = create_ok(client, funded, mch_order_no="NL-1")
    assert_refused(create(client, funded, mch_order_no="NL-1\n"), 400, "1000", "mch_order_no")
    assert list(Payout.objects.values_list("pk", "mch_order_no")) == [(payout.pk, "NL-1")]


def test_payout_create_at_format_limits_is_accepted(client, funded):
    payout = create_ok(client, funded, mch_order_no="m" * 64, payee_name="n" * 128, payee_account="A9" * 32,
                       attach="a" * 512)
    assert (len(payout.payee_account), len(payout.attach)) == (64, 512)


# --- business validation, in the order of docs/api.md, "Create endpoints: validation order" ------------------


def test_payout_in_currency_not_enabled_for_merchant_returns_1001(client, funded):
    assert_refused(create(client, funded, currency="JPY", product_code="JPY_PAYOUT", bank_code="MUFG"),
                   422, "1001", "JPY")


def test_payout_in_unknown_currency_returns_1001(client, funded):
    assert_refused(create(client, funded, currency="php"), 422, "1001")


def test_payout_in_inactive_currency_returns_1001(client, funded):
    Currency.objects.filter(code="USD").update(active=False)
    assert_refused(create(client, funded, currency="USD", product_code="USD_PAYOUT", bank_code="CHASE"), 422, "1001")


def test_payout_in_currency_without_serving_channel_returns_1001(client, funded):
    Channel.objects.filter(currency_id="USD", direction=Channel.Direction.PAYOUT).update(is_active=False)
    assert_refused(create(client, funded, currency="USD", product_code="USD_PAYOUT", bank_code="CHASE"),
                   422, "1001", "channel")


def test_currency_is_checked_before_product(client, funded):
    assert_refused(create(client, funded, currency="JPY", product_code="NOPE", bank_code="NOPE"), 422, "1001")


@pytest.mark.parametrize("product_code", ["NOPE", "PHP_COLLECT_D0", "USD_PAYOUT"])
def test_payout_with_unknown_collection_or_other_currency_product_returns_1002(client, funded, product_code):
    assert_refused(create(client, funded, product_code=product_code), 422, "1002", "product_code")


def test_payout_with_product_not_enabled_for_merchant_returns_1002(client, funded):
    MerchantProduct.objects.filter(merchant=funded.merchant, product__code="PHP_PAYOUT").update(is_enabled=False)
    assert_refused(create(client, funded), 422, "1002")


def test_product_is_checked_before_amount(client, funded):
    assert_refused(create(client, funded, product_code="NOPE", amount=1), 422, "1002")


@pytest.mark.parametrize("amount", [99, 50_000_001])
def test_payout_amount_outside_product_bounds_returns_1003(client, funded, amount):
    assert_refused(create(client, funded, amount=amount), 422, "1003", "amount")


@pytest.mark.parametrize("amount", [100, 50_000_000])
def test_payout_amount_at_product_bounds_is_accepted(client, merchant, amount):
    fund(merchant, amount + PHP_FEE)
    create_ok(client, merchant, amount=amount)


def test_amount_is_checked_before_bank_code(client, funded):
    assert_refused(create(client, funded, amount=99, bank_code="NOPE"), 422, "1003")


@pytest.mark.parametrize("bank_code", ["NOPE", "CHASE", "bdo"])
def test_payout_with_bank_code_not_in_currency_table_returns_2006(client, funded, bank_code):
    # CHASE is a USD bank code: the table is per currency.
    assert_refused(create(client, funded, bank_code=bank_code), 422, "2006", "bank_code")


def test_payout_with_inactive_bank_code_returns_2006(client, funded):
    BankCode.objects.filter(currency_id="PHP", code="BDO").update(is_active=False)
    assert_refused(create(client, funded), 422, "2006")


def test_bank_code_is_checked_before_balance(client, merchant):
    assert_refused(create(client, merchant, bank_code="NOPE"), 422, "2006")


def test_payout_above_available_returns_2003_and_leaves_no_order_hold_or_posting(client, merchant):
    fund(merchant, 10_000 + PHP_FEE - 1)
    before, postings = balances(merchant), Posting.objects.count()
    assert_refused(create(client, merchant, amount=10_000), 422, "2003")
    assert not Payout.objects.exists()
    assert not Hold.objects.exists()
    assert (balances(merchant), Posting.objects.count()) == (before, postings)


def test_payout_of_exactly_available_freezes_amount_plus_fee(client, merchant):
    fund(merchant, 10_000 + PHP_FEE)
    payout = create_ok(client, merchant, amount=10_000)
    assert (payout.fee, payout.hold.amount, payout.hold.status) == (PHP_FEE, 10_000 + PHP_FEE, Hold.Status.HELD)
    assert balances(merchant) == {"available": 0, "settling": 0, "frozen": 10_000 + PHP_FEE}


def test_the_orders_insert_draws_its_holds_id_and_an_order_without_that_hold_is_refused_at_commit(client, funded):
    """The INSERT that claims the order's key also draws its hold's id (Payout.hold's default), and hold_place
    inserts the hold under it: the row is written once. An order row whose hold was never placed cannot commit:
    the foreign key, deferred to COMMIT, refuses it (forced here with SET CONSTRAINTS)."""
    payout = create_ok(client, funded)
    assert Hold.objects.get(pk=payout.hold_id).cause == payout.platform_order_no
    orphan = Payout(merchant=funded.merchant, mch_order_no="NO-HOLD", product=payout.product, currency_id="PHP",
                    channel=payout.channel, amount=10_000, fee=PHP_FEE, payee_name="Juan", payee_account="1",
                    bank_code="BDO", status=Payout.Status.APPROVED)
    with pytest.raises(IntegrityError, match="hold"), transaction.atomic():
        orphan.save(force_insert=True)
        assert orphan.hold_id > payout.hold_id  # drawn by the INSERT, returned with the primary key
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    assert not Payout.objects.filter(mch_order_no="NO-HOLD").exists()


def test_the_orders_insert_writes_every_field_of_the_new_order_as_the_service_returned_it(client, funded):
    """The order's INSERT is written by hand (apps/payout/services.py, _PAYOUT_INSERT): the row read back equals the
    instance the service returned in every field, and every column it leaves out is one a new order has NULL. A field
    added to Payout fails here until the INSERT writes it (or it is NULL on a new order)."""
    from apps.merchants.models import Product
    from apps.payout.services import _PAYOUT_INSERT, payout_create

    created = payout_create(merchant=funded.merchant, mch_order_no="BY-HAND", product_code="PHP_PAYOUT",
                            amount=10_000, currency="PHP", payee_name="Juan", payee_account="0012345678",
                            bank_code="BDO", attach="note")
    assert not created._state.adding and created.pk and created.hold_id
    stored = Payout.objects.get(pk=created.pk)
    for field in Payout._meta.concrete_fields:
        assert getattr(created, field.attname) == getattr(stored, field.attname), field.name
    assert created.product == Product.objects.get(code="PHP_PAYOUT") and created.hold.cause == created.platform_order_no
    written = {column.strip('"') for column in _PAYOUT_INSERT.split("(", 1)[1].split(")", 1)[0].split(", ")}
    left_out = {field.column for field in Payout._meta.concrete_fields} - written
    assert left_out == {field.column for field in Payout._meta.concrete_fields
                        if field.primary_key or field.column == "hold_id"
                        or (field.null and getattr(stored, field.attname) is None)}


def test_the_create_is_logged_after_its_commit_not_while_it_holds_the_merchants_balance_rows(client, funded):
    """The merchant's balance rows are locked from the hold's posting to COMMIT, and every create of the merchant
    waits for them: the "created" line is written after the create's transaction, not inside it."""
    import logging

    outer = len(connection.atomic_blocks)  # the test's own transaction
    seen = []

    class Spy(logging.Handler):
        def emit(self, record):
            if "created" in record.getMessage():
                seen.append(len(connection.atomic_blocks))

    spy, log = Spy(level=logging.INFO), logging.getLogger("apps.payout.services")
    old_level = log.level
    log.addHandler(spy)
    log.setLevel(logging.INFO)
    try:
        create_ok(client, funded)
    finally:
        log.removeHandler(spy)
        log.setLevel(old_level)
    assert seen == [outer]


# --- the created order ----------------------------------------------------------------------------------


def test_payout_create_returns_the_interface_shape(client, funded):
    status, body = create(client, funded, mch_order_no="SHAPE-1", amount=12_345)
    assert (status, body["code"], body["msg"]) == (200, "0", "OK")
    data = body["data"]
    assert set(data) == {"platform_order_no", "mch_order_no", "amount", "fee", "currency", "status", "review_required"}
    assert data | {"platform_order_no": None} == {"platform_order_no": None, "mch_order_no": "SHAPE-1",
                                                  "amount": 12_345, "fee": PHP_FEE, "currency": "PHP",
                                                  "status": "APPROVED", "review_required": False}


def test_platform_order_numbers_are_alphanumeric_and_unguessable(client, funded):
    numbers = [create_ok(client, funded).platform_order_no for _ in range(3)]
    assert all(n.isalnum() and n.isascii() and len(n) <= 64 for n in numbers)
    assert len({n[-32:] for n in numbers}) == 3 and len(numbers[0]) >= 32


def test_fee_is_fixed_plus_rate_rounded_up(client, funded):
    from apps.merchants.models import Product
    Product.objects.filter(code="PHP_PAYOUT").update(fee_fixed=500, fee_rate_bps=125)
    payout = create_ok(client, funded, amount=10_001)  # 500 + ceil(10001 * 125 / 10000) = 500 + 126
    assert payout.fee == 626


# --- idempotent replay and 2001 -------------------------------------------------------------------------


def test_identical_create_replays_the_original_order_and_moves_no_money(client, funded):
    params = payout_params(mch_order_no="REPLAY-1", attach="x")
    first = create(client, funded, **params)
    before, postings = balances(funded), Posting.objects.count()
    second = create(client, funded, **params)
    assert second == first
    assert (balances(funded), Posting.objects.count()) == (before, postings)
    assert Payout.objects.filter(mch_order_no="REPLAY-1").count() == 1


def test_replay_shows_the_current_status(client, funded):
    params = payout_params(mch_order_no="REPLAY-2")
    payout = create_ok(client, funded, **params)
    Payout.objects.filter(pk=payout.pk).update(status=Payout.Status.PROCESSING)
    status, body = create(client, funded, **params)
    assert (status, body["data"]["status"], body["data"]["platform_order_no"]) == (200, "PROCESSING",
                                                                                  payout.platform_order_no)


def test_replay_treats_empty_attach_as_absent(client, funded):
    params = payout_params(mch_order_no="REPLAY-3")
    payout = create_ok(client, funded, **params)
    status, body = create(client, funded, **params, attach="")
    assert (status, body["data"]["platform_order_no"]) == (200, payout.platform_order_no)


def test_replay_comes_before_currency_checks(client, funded):
    params = payout_params(mch_order_no="REPLAY-4")
    payout = create_ok(client, funded, **params)
    Channel.objects.filter(currency_id="PHP", direction=Channel.Direction.PAYOUT).update(is_active=False)
    status, body = create(client, funded, **params)
    assert (status, body["data"]["platform_order_no"]) == (200, payout.platform_order_no)


@pytest.mark.parametrize("change", [{"amount": 10_001}, {"payee_account": "999"}, {"bank_code": "BPI"},
                                    {"payee_name": "Other"}, {"attach": "y"}, {"currency": "USD"}])
def test_same_mch_order_no_with_different_params_returns_2001(client, funded, change):
    params = payout_params(mch_order_no="DUP-1")
    create_ok(client, funded, **params)
    postings = Posting.objects.count()
    assert_refused(create(client, funded, **{**params, **change}), 409, "2001", "mch_order_no")
    assert Posting.objects.count() == postings


# Identical parameters must not replay the other merchant's order; different ones must not be its 2001 conflict.
@pytest.mark.parametrize("theirs", [{}, {"amount": 20_000, "payee_account": "999", "attach": "theirs"}])
def test_same_mch_order_no_at_another_merchant_is_a_new_order(client, funded, other_merchant, theirs):
    fund(other_merchant, 100_000)
    mine = create_ok(client, funded, mch_order_no="SHARED-1")
    status, body = create(client, other_merchant, mch_order_no="SHARED-1", **theirs)
    assert (status, body["code"]) == (200, "0"), body
    assert body["data"]["platform_order_no"] != mine.platform_order_no
    other = Payout.objects.get(platform_order_no=body["data"]["platform_order_no"])
    assert (other.merchant_id, other.mch_order_no, other.amount) == (
        other_merchant.merchant.pk, "SHARED-1", theirs.get("amount", mine.amount))
    assert Payout.objects.filter(mch_order_no="SHARED-1").count() == 2
    # Each froze its own money.
    assert balances(other_merchant) == {"available": 100_000 - other.amount - other.fee, "settling": 0,
                                        "frozen": other.amount + other.fee}
    assert balances(funded)["frozen"] == mine.amount + mine.fee


# --- payout/query ---------------------------------------------------------------------------------------


def test_query_by_either_number_returns_the_order(client, funded):
    payout = create_ok(client, funded, mch_order_no="Q-1")
    expected = {"platform_order_no": payout.platform_order_no, "mch_order_no": "Q-1", "amount": 10_000,
                "fee": PHP_FEE, "currency": "PHP", "status": "APPROVED"}
    assert query(client, funded, mch_order_no="Q-1") == (200, {"code": "0", "msg": "OK", "data": expected})
    assert query(client, funded, platform_order_no=payout.platform_order_no)[1]["data"] == expected


def test_query_with_both_numbers_uses_platform_order_no(client, funded):
    first = create_ok(client, funded, mch_order_no="Q-2")
    create_ok(client, funded, mch_order_no="Q-3")
    status, body = query(client, funded, platform_order_no=first.platform_order_no, mch_order_no="Q-3")
    assert body["data"]["mch_order_no"] == "Q-2"


def test_query_without_a_number_returns_1000(client, funded):
    assert_refused(query(client, funded), 400, "1000")


def test_query_with_malformed_number_returns_1000(client, funded):
    assert_refused(query(client, funded, platform_order_no="PO-with-dash"), 400, "1000")


@pytest.mark.parametrize("number, variant", [
    ("mch_order_no", "{}\n"), ("mch_order_no", " {} "), ("mch_order_no", "{} "),
    ("platform_order_no", "{}\n"), ("platform_order_no", " {}"), ("platform_order_no", "{}\t"),
])
def test_query_with_number_padded_by_whitespace_or_newline_returns_1000_not_the_order(client, funded, number,
                                                                                          variant):
    payout = create_ok(client, funded, mch_order_no="Q-WS")
    assert_refused(query(client, funded, **{number: variant.format(getattr(payout, number))}), 400, "1000", number)


def test_query_of_unknown_or_other_merchants_order_returns_2002(client, funded, other_merchant):
    fund(other_merchant, 100_000)
    theirs = create_ok(client, other_merchant, mch_order_no="THEIRS-1")
    assert_refused(query(client, funded, platform_order_no=theirs.platform_order_no), 404, "2002")
    assert_refused(query(client, funded, mch_order_no="THEIRS-1"), 404, "2002")
    assert_refused(query(client, funded, mch_order_no="NOPE"), 404, "2002")


def test_query_shows_attach_and_terminal_fields(client, funded):
    payout = create_ok(client, funded, attach="  keep me  ")
    Payout.objects.filter(pk=payout.pk).update(status=Payout.Status.FAILED, fail_reason="account closed",
                                               finished_at=payout.created_at)
    data = query(client, funded, platform_order_no=payout.platform_order_no)[1]["data"]
    assert (data["attach"], data["fail_reason"], data["finished_at"]) == (
        "  keep me  ", "account closed", int(payout.created_at.timestamp()))
    assert "reversed_at" not in data
