"""Model-based test of the money services.

A Hypothesis state machine drives the services a merchant request, an upstream notification, a periodic task,
a risk reviewer or an operator would call: pay-in create (and replays), paid notifications (duplicates and late
ones after expiry), expiry, D1 release across Manila midnights, payout create (incl. refused for balance), review,
submission, channel results, reversals and ops adjustments. The test keeps its own model of every balance,
written from the contract (fees, D0/D1, freeze of amount + fee, reversal bounds), and after every step checks the
database against it and against the ledger's own invariants. See docs/testing.md.

Reproduce: the run is fixed by MODEL_SEED (printed on failure); MODEL_EXAMPLES and MODEL_STEPS shrink it for
local iteration, e.g. `MODEL_EXAMPLES=20 uv run pytest tests/model -q`.
"""

import itertools
import os
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from hypothesis import HealthCheck, event, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (Bundle, RuleBasedStateMachine, initialize, invariant, multiple, precondition,
                                 rule,
                                 run_state_machine_as_test)

from apps.collection import services as collection_services
from apps.collection.models import CollectionOrder
from apps.collection.tasks import expire_due_orders
from apps.common.errors import DomainError, ErrorCode
from apps.ledger.models import Entry, Hold, LedgerAccount, Posting
from apps.ledger.selectors import ledger_verify
from apps.ledger.services import balance_adjust
from apps.merchants.models import MerchantCurrency, MerchantProduct, Product
from apps.payout import services as payout_services
from apps.payout.models import Payout
from tests.conftest import make_merchant
from tests.support import flush

MODEL_SEED = int(os.environ.get("MODEL_SEED", "20250611"))
MODEL_EXAMPLES = int(os.environ.get("MODEL_EXAMPLES", "200"))
MODEL_STEPS = int(os.environ.get("MODEL_STEPS", "50"))

# The CI profile (registered, not loaded: other Hypothesis tests keep their own settings). database=None: the
# run depends on the seed only, never on examples saved by an earlier run.
settings.register_profile(
    "ledger-model-ci", max_examples=200, stateful_step_count=50, deadline=None, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
MODEL_SETTINGS = settings(settings.get_profile("ledger-model-ci"), max_examples=MODEL_EXAMPLES,
                          stateful_step_count=MODEL_STEPS)

MANILA = ZoneInfo("Asia/Manila")
# 22:00 in Manila: a few clock advances cross midnight, the D1 cutoff.
START = datetime(2025, 3, 10, 22, 0, tzinfo=MANILA)


@dataclass(frozen=True)
class CurrencySpec:
    """The products the model uses in one currency: (fee_fixed, fee_rate_bps) each, bounds, thresholds."""

    code: str
    d0_fee: tuple[int, int]
    d1_fee: tuple[int, int]
    payout_fee: tuple[int, int]
    collection_bounds: tuple[int, int]
    payout_bounds: tuple[int, int]
    review_threshold: int
    bank_code: str
    max_adjustment: int


# Two minor units (PHP: 2, KWD: 3); every product has a fixed fee and a rate, so ceil() rounding is exercised.
CURRENCIES = {
    "PHP": CurrencySpec("PHP", d0_fee=(150, 275), d1_fee=(99, 150), payout_fee=(1000, 35),
                        collection_bounds=(100, 200_000), payout_bounds=(100, 200_000), review_threshold=100_000,
                        bank_code="BDO", max_adjustment=500_000),
    "KWD": CurrencySpec("KWD", d0_fee=(250, 125), d1_fee=(7, 333), payout_fee=(500, 18),
                        collection_bounds=(1000, 2_000_000), payout_bounds=(1000, 2_000_000),
                        review_threshold=1_000_000, bank_code="NBK", max_adjustment=5_000_000),
}
PAYEE_ACCOUNTS = ["0012340001", "0012340002"]  # two, so the velocity rule (> N per payee in 24 h) can trigger

# Tables the services write; emptied between examples, with every table that references them (what TRUNCATE ...
# CASCADE empties). Reference data, the two merchants and their products stay.
# Callback events and audit rows are left to accumulate: nothing in the model reads them.
RESET_MODELS = [Entry, Hold, Posting, LedgerAccount, Payout, CollectionOrder]


def reset_tables() -> None:
    """Empty RESET_MODELS' tables and those referencing them before each example. By DELETE with the triggers off
    (the ledger's refuse a DELETE) and the reference generation moved, as tests/support/flush.py empties a database
    after a transactional test, not by TRUNCATE: a TRUNCATE of these 8 tables took 200-560 ms of wall time (30 ms of
    PostgreSQL CPU) on the loaded 2-core host against 2-17 ms, and it ran before each of the 200 examples
    (docs/performance.md, "Measured changes"). Without a superuser connection: the TRUNCATE, as before."""
    tables = [model._meta.db_table for model in RESET_MODELS]
    if flush.superuser(connection):
        flush.empty(connection, flush.referencing(connection, tables))
        return
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(connection.ops.quote_name(table) for table in tables)} CASCADE")


REQUIRED_PATHS = [
    "pay-in refused: fee >= amount", "pay-in: duplicate notification", "pay-in: paid while CREATED",
    "pay-in: paid while EXPIRED", "pay-in: expired", "D1 release: something due",
    "adjustment refused: debit below zero",
    "payout refused: balance", "payout: created APPROVED", "payout: created FROZEN", "payout: velocity review",
    "payout: approved in review", "payout: rejected in review", "payout: SUCCESS", "payout: FAILED",
    "payout: duplicate channel result", "reversal: full", "reversal: partial", "reversal refused",
    "reversal: channel return",
]


def expected_fee(fee: tuple[int, int], amount: int) -> int:
    """docs/api.md, "Collection orders" and "Payout orders": fee_fixed + ceil(amount × bps / 10000), in integers."""
    fee_fixed, bps = fee
    return fee_fixed + (amount * bps + 9999) // 10000


def one_of_keys(keys: list):
    """One of `keys` by its index. Not sampled_from: its label hashes the elements (random order numbers, and
    str hashes differ per process), which would make the run depend on more than the seed."""
    return st.integers(0, len(keys) - 1).map(keys.__getitem__)


def affordable(spec: CurrencySpec, available: int) -> int:
    """The largest payout amount whose amount + fee fits in `available` (0 when none does)."""
    low, high = 0, available
    while low < high:
        mid = (low + high + 1) // 2
        if mid + expected_fee(spec.payout_fee, mid) <= available:
            low = mid
        else:
            high = mid - 1
    return low


def manila_midnight(now: datetime) -> datetime:
    """00:00 of `now`'s day in Manila (docs/api.md, "Collection orders"): D1 credits paid before it are due."""
    return datetime.combine(now.astimezone(MANILA).date(), time.min, tzinfo=MANILA)


@dataclass
class World:
    """Set up once per test run: the merchants (by index 0, 1) and product codes the machine uses."""

    merchants: list
    products: dict  # (currency, "D0" | "D1" | "PAYOUT") -> Product


@dataclass
class CollectionModel:
    platform_order_no: str
    order_id: int
    merchant: int
    currency: str
    product_code: str
    settlement: str
    amount: int
    fee: int
    expire_seconds: int
    mch_order_no: str
    expire_at: datetime
    status: str = "CREATED"
    paid_at: datetime | None = None
    released: bool = False


@dataclass
class PayoutModel:
    platform_order_no: str
    payout_id: int
    merchant: int
    currency: str
    product_code: str
    mch_order_no: str
    payee_account: str
    amount: int
    fee: int
    created_at: datetime
    status: str
    approved_by_review: bool = False
    hold: str = "held"
    reversal: tuple[int, int] | None = None


class LedgerMachine(RuleBasedStateMachine):
    world: World  # set by the test before the run
    paths: Counter = Counter()  # over the whole run

    collections = Bundle("collections")
    payouts = Bundle("payouts")

    def __init__(self):
        super().__init__()
        reset_tables()
        self.now = START
        self.travel = time_machine.travel(self.now, tick=False)
        self.clock = self.travel.start()
        self.numbers = itertools.count(1)
        # (merchant_id or None, currency, account kind) -> balance, and the postings expected per kind.
        self.balances: dict[tuple, int] = defaultdict(int)
        self.postings: Counter = Counter()
        self.collection_orders: dict[str, CollectionModel] = {}
        self.payout_orders: dict[str, PayoutModel] = {}

    # --- model helpers ---------------------------------------------------------------------------------------

    def cover(self, path: str) -> None:
        """Count a path through the services, so the test can show the interesting ones were taken."""
        event(path)
        self.paths[path] += 1

    def merchant(self, index: int):
        return self.world.merchants[index]

    def post(self, kind: str, currency: str, moves: dict[tuple, int]) -> None:
        """Expected posting: {(merchant_id | None, account kind): signed amount}; zero-sum by construction."""
        assert sum(moves.values()) == 0, (kind, moves)
        for (merchant_id, account), amount in moves.items():
            self.balances[(merchant_id, currency, account)] += amount
            if merchant_id is not None:
                assert self.balances[(merchant_id, currency, account)] >= 0, "the model itself went negative"
        self.postings[kind] += 1

    def available(self, merchant_id: int, currency: str) -> int:
        return self.balances[(merchant_id, currency, "available")]

    @initialize(data=st.data())
    def fund(self, data):
        """Ops credits to start from, per merchant and currency (zero: that balance starts empty)."""
        for merchant in (0, 1):
            for currency, spec in sorted(CURRENCIES.items()):
                amount = data.draw(st.integers(0, spec.max_adjustment), label=f"start {merchant} {currency}")
                if amount:
                    self._adjust(merchant, currency, amount)

    # --- pay-in ----------------------------------------------------------------------------------------------

    @rule(target=collections, merchant=st.integers(0, 1), currency=one_of_keys(sorted(CURRENCIES)),
          settlement=one_of_keys(["D0", "D1"]), expire_seconds=st.sampled_from([60, 600, 3600]), data=st.data())
    def create_collection(self, merchant, currency, settlement, expire_seconds, data):
        spec = CURRENCIES[currency]
        amount = data.draw(st.integers(*spec.collection_bounds), label="amount")
        fee = expected_fee(spec.d0_fee if settlement == "D0" else spec.d1_fee, amount)
        product = self.world.products[(currency, settlement)]
        mch_order_no = f"C{next(self.numbers)}"
        params = dict(merchant=self.merchant(merchant), mch_order_no=mch_order_no, product_code=product.code,
                      amount=amount, currency=currency, expire_seconds=expire_seconds)
        if fee >= amount:  # a pay-in that would credit nothing is refused (docs/collections.md)
            self.cover("pay-in refused: fee >= amount")
            with pytest.raises(DomainError) as refused:
                collection_services.collection_create(**params)
            assert refused.value.error == ErrorCode.AMOUNT_OUT_OF_RANGE
            return multiple()
        order = collection_services.collection_create(**params)
        assert (order.status, order.fee, order.settlement, order.expire_at) == (
            "CREATED", fee, settlement, self.now + timedelta(seconds=expire_seconds))
        self.collection_orders[order.platform_order_no] = CollectionModel(
            order.platform_order_no, order.pk, merchant, currency, product.code, settlement, amount, fee,
            expire_seconds, mch_order_no, expire_at=self.now + timedelta(seconds=expire_seconds))
        return order.platform_order_no

    @rule(key=collections, same=st.booleans())
    def replay_collection(self, key, same):
        """The same mch_order_no again: identical parameters return the order, different ones are 2001."""
        m = self.collection_orders[key]
        params = dict(merchant=self.merchant(m.merchant), mch_order_no=m.mch_order_no, product_code=m.product_code,
                      amount=m.amount if same else m.amount + 1, currency=m.currency, expire_seconds=m.expire_seconds)
        if same:
            order = collection_services.collection_create(**params)
            assert (order.platform_order_no, order.status) == (key, m.status)
        else:
            with pytest.raises(DomainError) as refused:
                collection_services.collection_create(**params)
            assert refused.value.error == ErrorCode.DUPLICATE_ORDER

    @rule(key=collections)
    def notify_paid(self, key):
        """Upstream says paid: first time credits amount − fee (D0 available, D1 settling); duplicates nothing."""
        m = self.collection_orders[key]
        order = collection_services.collection_notify_paid(platform_order_no=key, upstream_reference=f"UP-{key}")
        if m.status == "SUCCESS":
            self.cover("pay-in: duplicate notification")
        else:
            self.cover(f"pay-in: paid while {m.status}")
            m.status, m.paid_at = "SUCCESS", self.now
            credit = "available" if m.settlement == "D0" else "settling"
            merchant_id = self.merchant(m.merchant).pk
            moves = {(None, "payin_clearing"): -m.amount, (merchant_id, credit): m.amount - m.fee}
            moves[(None, "fee_revenue")] = m.fee
            self.post("collection.success", m.currency, moves)
        assert (order.status, order.paid_at) == ("SUCCESS", m.paid_at)

    @precondition(lambda self: any(m.status != "SUCCESS" for m in self.collection_orders.values()))
    @rule(data=st.data())
    def notify_unpaid(self, data):
        """A first notification for an order not yet paid (CREATED, or EXPIRED: a late payment)."""
        self.notify_paid(data.draw(one_of_keys([key for key, m in self.collection_orders.items()
                                                if m.status != "SUCCESS"]), label="unpaid order"))

    @rule(key=collections)
    def expire(self, key):
        """The expiry service on one order: only a CREATED order at or past expire_at moves, to EXPIRED."""
        m = self.collection_orders[key]
        due = m.status == "CREATED" and self.now >= m.expire_at
        assert collection_services.collection_expire(order_id=m.order_id) is due
        if due:
            self.cover("pay-in: expired")
            m.status = "EXPIRED"

    @rule()
    def expire_due(self):
        """The periodic expiry task: every CREATED order at or past expire_at."""
        due = [m for m in self.collection_orders.values() if m.status == "CREATED" and self.now >= m.expire_at]
        assert expire_due_orders() == len(due)
        for m in due:
            self.cover("pay-in: expired")
            m.status = "EXPIRED"

    @rule()
    def release_d1(self):
        """D1 release: each D1 credit paid before 00:00 Manila today moves settling → available, once."""
        cutoff = manila_midnight(self.now)
        expected: dict[str, dict[str, int]] = {}
        for m in self.collection_orders.values():
            if m.settlement == "D1" and m.status == "SUCCESS" and not m.released and m.paid_at < cutoff:
                m.released = True
                merchant_id = self.merchant(m.merchant).pk
                net = m.amount - m.fee
                self.post("settlement.release", m.currency,
                          {(merchant_id, "settling"): -net, (merchant_id, "available"): net})
                total = expected.setdefault(m.currency, {"count": 0, "amount": 0})
                total["count"] += 1
                total["amount"] += net
        self.cover(f"D1 release: {'something' if expected else 'nothing'} due")
        assert collection_services.collection_settlement_release()["released"] == expected

    @rule(seconds=st.sampled_from([1, 59, 60, 599, 600, 3600, 4 * 3600, 86400]))
    def advance_clock(self, seconds):
        self.now += timedelta(seconds=seconds)
        self.clock.move_to(self.now)

    @rule(minutes=st.sampled_from([0, 1, 5, 90]))
    def next_day_release(self, minutes):
        """The day rolls over in Manila and the periodic D1 release runs, at 00:00 sharp or a little later."""
        self.now = manila_midnight(self.now) + timedelta(days=1, minutes=minutes)
        self.clock.move_to(self.now)
        self.release_d1()

    # --- ops adjustments -------------------------------------------------------------------------------------

    @rule(merchant=st.integers(0, 1), currency=one_of_keys(sorted(CURRENCIES)), data=st.data())
    def credit(self, merchant, currency, data):
        """Ops credit of available (the usual way the model's merchants get money to pay out)."""
        amount = data.draw(st.integers(1, CURRENCIES[currency].max_adjustment), label="amount")
        self._adjust(merchant, currency, amount)

    @rule(merchant=st.integers(0, 1), currency=one_of_keys(sorted(CURRENCIES)), data=st.data())
    def debit(self, merchant, currency, data):
        """Ops debit of available: up to all of it is taken, one unit more is refused and changes nothing."""
        available = self.available(self.merchant(merchant).pk, currency)
        amount = data.draw(st.one_of(st.just(available), st.just(available + 1), st.integers(1, 2 * available + 1))
                           .map(lambda a: max(a, 1)), label="amount")
        self._adjust(merchant, currency, -amount)

    def _adjust(self, merchant, currency, amount):
        merchant_id = self.merchant(merchant).pk
        if self.available(merchant_id, currency) + amount < 0:
            self.cover("adjustment refused: debit below zero")
            with pytest.raises(ValueError):
                balance_adjust(merchant_no=self.merchant(merchant).merchant_no, currency=currency, amount=amount,
                               reason="model test")
            return
        result = balance_adjust(merchant_no=self.merchant(merchant).merchant_no, currency=currency, amount=amount,
                                reason="model test")
        self.post("adjustment", currency, {(None, "adjustments"): -amount, (merchant_id, "available"): amount})
        assert (result["available"], result["settling"]) == (
            self.available(merchant_id, currency), self.balances[(merchant_id, currency, "settling")])

    # --- payouts ---------------------------------------------------------------------------------------------

    @rule(target=payouts, merchant=st.integers(0, 1), currency=one_of_keys(sorted(CURRENCIES)),
          payee_account=one_of_keys(PAYEE_ACCOUNTS), data=st.data())
    def create_payout(self, merchant, currency, payee_account, data):
        """Any amount in the product's bounds, or around the most the available balance covers (2003 above)."""
        spec = CURRENCIES[currency]
        most = affordable(spec, self.available(self.merchant(merchant).pk, currency))
        low, high = spec.payout_bounds
        amount = data.draw(st.one_of(st.integers(low, high), st.sampled_from([most, most + 1]))
                           .map(lambda a: min(max(a, low), high)), label="amount")
        return self._create_payout(merchant, currency, payee_account, amount)

    @precondition(lambda self: any(affordable(CURRENCIES[c], b) >= CURRENCIES[c].payout_bounds[0]
                                   for (m, c, kind), b in self.balances.items() if kind == "available"))
    @rule(target=payouts, payee_account=one_of_keys(PAYEE_ACCOUNTS), data=st.data())
    def create_affordable_payout(self, payee_account, data):
        """A payout the balance covers, so lifecycles (and the velocity rule) happen often."""
        funded = sorted((merchant, c) for merchant in (0, 1) for c, spec in CURRENCIES.items()
                        if affordable(spec, self.available(self.merchant(merchant).pk, c)) >= spec.payout_bounds[0])
        merchant, currency = data.draw(one_of_keys(funded), label="merchant, currency")
        spec = CURRENCIES[currency]
        most = min(affordable(spec, self.available(self.merchant(merchant).pk, currency)), spec.payout_bounds[1])
        amount = data.draw(st.integers(spec.payout_bounds[0], most), label="amount")
        return self._create_payout(merchant, currency, payee_account, amount)

    def _create_payout(self, merchant, currency, payee_account, amount):
        """Freeze amount + fee, or 2003 with no order and no hold; FROZEN at the threshold or over velocity."""
        spec = CURRENCIES[currency]
        merchant_obj = self.merchant(merchant)
        fee = expected_fee(spec.payout_fee, amount)
        mch_order_no = f"P{next(self.numbers)}"
        params = dict(merchant=merchant_obj, mch_order_no=mch_order_no,
                      product_code=self.world.products[(currency, "PAYOUT")].code, amount=amount, currency=currency,
                      payee_name="Model Payee", payee_account=payee_account, bank_code=spec.bank_code)
        if self.available(merchant_obj.pk, currency) < amount + fee:
            self.cover("payout refused: balance")
            with pytest.raises(DomainError) as refused:
                payout_services.payout_create(**params)
            assert refused.value.error == ErrorCode.INSUFFICIENT_BALANCE
            assert not Payout.objects.filter(merchant=merchant_obj, mch_order_no=mch_order_no).exists()
            return multiple()
        earlier = sum(1 for p in self.payout_orders.values() if p.merchant == merchant
                      and p.payee_account == payee_account and p.created_at >= self.now - timedelta(hours=24))
        review = amount >= spec.review_threshold or earlier >= django_settings.PAYOUT_VELOCITY_LIMIT
        if earlier >= django_settings.PAYOUT_VELOCITY_LIMIT:
            self.cover("payout: velocity review")
        payout = payout_services.payout_create(**params)
        status = "FROZEN" if review else "APPROVED"
        self.cover(f"payout: created {status}")
        assert (payout.status, payout.review_required, payout.fee) == (status, review, fee)
        self.post("hold.place", currency, {(merchant_obj.pk, "available"): -(amount + fee),
                                           (merchant_obj.pk, "frozen"): amount + fee})
        self.payout_orders[payout.platform_order_no] = PayoutModel(
            payout.platform_order_no, payout.pk, merchant, currency, params["product_code"], mch_order_no,
            payee_account, amount, fee, created_at=self.now, status=status)
        return payout.platform_order_no

    @rule(key=payouts, same=st.booleans())
    def replay_payout(self, key, same):
        m = self.payout_orders[key]
        params = dict(merchant=self.merchant(m.merchant), mch_order_no=m.mch_order_no, product_code=m.product_code,
                      amount=m.amount, currency=m.currency, payee_name="Model Payee",
                      payee_account=m.payee_account if same else "0099999999",
                      bank_code=CURRENCIES[m.currency].bank_code)
        if same:
            payout = payout_services.payout_create(**params)
            assert (payout.platform_order_no, payout.status) == (key, m.status)
        else:
            with pytest.raises(DomainError) as refused:
                payout_services.payout_create(**params)
            assert refused.value.error == ErrorCode.DUPLICATE_ORDER

    def _release(self, m: PayoutModel, kind: str = "hold.release") -> None:
        merchant_id = self.merchant(m.merchant).pk
        self.post(kind, m.currency, {(merchant_id, "frozen"): -(m.amount + m.fee),
                                     (merchant_id, "available"): m.amount + m.fee})
        m.hold = "released"

    def in_state(self, status: str) -> list[str]:
        return [key for key, m in self.payout_orders.items() if m.status == status]

    # Any payout, whatever its state (most of these are refused or repeats)...

    @rule(key=payouts)
    def approve(self, key):
        self._approve(key)

    @rule(key=payouts)
    def reject(self, key):
        self._reject(key)

    @rule(key=payouts)
    def submit(self, key):
        self._submit(key)

    @rule(key=payouts, outcome=one_of_keys(["paid", "failed"]))
    def channel_result(self, key, outcome):
        self._channel_result(key, outcome)

    @rule(key=payouts, data=st.data())
    def reverse(self, key, data):
        self._reverse_by_ops(key, data)

    # ...and the same services on a payout in the state where they apply, so whole lifecycles happen often.

    @precondition(lambda self: self.in_state("FROZEN"))
    @rule(data=st.data())
    def reviewer_approves_frozen(self, data):
        self._approve(data.draw(one_of_keys(self.in_state("FROZEN")), label="frozen payout"))

    @precondition(lambda self: self.in_state("FROZEN"))
    @rule(data=st.data())
    def reviewer_rejects_frozen(self, data):
        self._reject(data.draw(one_of_keys(self.in_state("FROZEN")), label="frozen payout"))

    @precondition(lambda self: self.in_state("APPROVED"))
    @rule()
    def worker_submits_approved(self):
        """What the submission task does for every approved payout."""
        for key in self.in_state("APPROVED"):
            self._submit(key)

    @precondition(lambda self: self.in_state("PROCESSING"))
    @rule(data=st.data())
    def channel_pays_processing(self, data):
        self._channel_result(data.draw(one_of_keys(self.in_state("PROCESSING")), label="processing payout"), "paid")

    @precondition(lambda self: self.in_state("PROCESSING"))
    @rule(data=st.data())
    def channel_fails_processing(self, data):
        self._channel_result(data.draw(one_of_keys(self.in_state("PROCESSING")), label="processing payout"),
                             "failed")

    def paid_unreversed(self) -> list[str]:
        return [key for key, m in self.payout_orders.items() if m.status == "SUCCESS" and m.reversal is None]

    @precondition(lambda self: self.paid_unreversed())
    @rule(data=st.data())
    def channel_returns_paid(self, data):
        self.channel_returned(data.draw(one_of_keys(self.paid_unreversed()), label="paid payout"))

    @precondition(lambda self: self.paid_unreversed())
    @rule(data=st.data())
    def ops_reverses_paid(self, data):
        self._reverse_by_ops(data.draw(one_of_keys(self.paid_unreversed()), label="paid payout"), data)

    @precondition(lambda self: self.paid_unreversed())
    @rule(data=st.data())
    def ops_reverses_paid_partially(self, data):
        """Within the bounds, and not both in full."""
        key = data.draw(one_of_keys(self.paid_unreversed()), label="paid payout")
        m = self.payout_orders[key]
        reversal_amount = data.draw(st.integers(1, m.amount), label="reversal_amount")
        fee_refund = data.draw(st.integers(0, m.fee if reversal_amount < m.amount else m.fee - 1), label="fee_refund")
        self._reverse_by_ops(key, amounts=(reversal_amount, fee_refund))

    @precondition(lambda self: self.paid_unreversed())
    @rule(data=st.data())
    def ops_reverses_paid_in_full(self, data):
        """The admin form's default: the whole amount and the whole fee."""
        key = data.draw(one_of_keys(self.paid_unreversed()), label="paid payout")
        m = self.payout_orders[key]
        self._reverse_by_ops(key, amounts=(m.amount, m.fee))

    def _approve(self, key):
        m = self.payout_orders[key]
        if m.approved_by_review:  # the same decision twice: nothing happens
            assert payout_services.payout_approve(payout_id=m.payout_id, reviewer=None, via="model").status == m.status
        elif m.status == "FROZEN":
            assert payout_services.payout_approve(payout_id=m.payout_id, reviewer=None, via="model").status == \
                "APPROVED"
            m.status, m.approved_by_review = "APPROVED", True
            self.cover("payout: approved in review")
        else:
            with pytest.raises(payout_services.PayoutActionRefused):
                payout_services.payout_approve(payout_id=m.payout_id, reviewer=None, via="model")

    def _reject(self, key):
        m = self.payout_orders[key]
        if m.status in ("FROZEN", "REJECTED"):
            payout = payout_services.payout_reject(payout_id=m.payout_id, reviewer=None, reason="model", via="model")
            assert payout.status == "REJECTED"
            if m.status == "FROZEN":
                self.cover("payout: rejected in review")
                m.status = "REJECTED"
                self._release(m)
        else:
            with pytest.raises(payout_services.PayoutActionRefused):
                payout_services.payout_reject(payout_id=m.payout_id, reviewer=None, reason="model", via="model")

    def _submit(self, key):
        """What the submission task does: APPROVED → PROCESSING; anything else is left alone."""
        m = self.payout_orders[key]
        payout = payout_services.payout_submit(payout_id=m.payout_id)
        if m.status == "APPROVED":
            self.cover("payout: PROCESSING")
            m.status = "PROCESSING"
        assert payout.status == m.status

    def _channel_result(self, key, outcome):
        """The channel's result: paid settles the hold (amount to clearing, fee to revenue), failed releases it."""
        m = self.payout_orders[key]
        target = "SUCCESS" if outcome == "paid" else "FAILED"
        if m.status == target:
            self.cover("payout: duplicate channel result")
        elif m.status != "PROCESSING":
            with pytest.raises(payout_services.PayoutActionRefused):
                payout_services.payout_channel_result(platform_order_no=key, outcome=outcome, fail_reason="model")
            return
        elif outcome == "paid":
            merchant_id = self.merchant(m.merchant).pk
            self.post("hold.settle", m.currency, {(merchant_id, "frozen"): -(m.amount + m.fee),
                                                  (None, "payout_clearing"): m.amount, (None, "fee_revenue"): m.fee})
            m.status, m.hold = "SUCCESS", "settled"
        else:
            self._release(m)
            m.status = "FAILED"
        self.cover(f"payout: {m.status}")
        payout = payout_services.payout_channel_result(platform_order_no=key, outcome=outcome, fail_reason="model")
        assert payout.status == m.status

    def _reverse(self, m: PayoutModel, reversal_amount: int, fee_refund: int) -> None:
        merchant_id = self.merchant(m.merchant).pk
        moves = {(None, "payout_clearing"): -reversal_amount, (merchant_id, "available"): reversal_amount + fee_refund}
        if fee_refund:
            moves[(None, "fee_revenue")] = -fee_refund
        self.post("payout.reversal", m.currency, moves)
        m.reversal = (reversal_amount, fee_refund)

    def _reverse_by_ops(self, key, data=None, amounts=None):
        """Ops reversal: SUCCESS, not reversed before, 1 ≤ amount ≤ payout amount, 0 ≤ fee refund ≤ fee."""
        m = self.payout_orders[key]
        if amounts is None:
            # Anything around the bounds (0 and amount + 1, -1 and fee + 1 are refused), or no fee refund.
            amounts = (data.draw(st.integers(0, m.amount + 1), label="reversal_amount"),
                       data.draw(st.one_of(st.just(0), st.integers(-1, m.fee + 1)), label="fee_refund"))
        reversal_amount, fee_refund = amounts
        allowed = (m.status == "SUCCESS" and m.reversal is None and 1 <= reversal_amount <= m.amount
                   and 0 <= fee_refund <= m.fee)
        if not allowed:
            self.cover("reversal refused")
            with pytest.raises(payout_services.PayoutActionRefused):
                payout_services.payout_reverse(payout_id=m.payout_id, reversal_amount=reversal_amount,
                                               fee_refund=fee_refund, reason="model")
            return
        self.cover("reversal: " + ("full" if (reversal_amount, fee_refund) == (m.amount, m.fee) else "partial"))
        self._reverse(m, reversal_amount, fee_refund)
        payout = payout_services.payout_reverse(payout_id=m.payout_id, reversal_amount=reversal_amount,
                                                fee_refund=fee_refund, reason="model")
        assert (payout.status, payout.reversal_amount, payout.fee_refund) == ("SUCCESS", reversal_amount, fee_refund)

    @rule(key=payouts)
    def channel_returned(self, key):
        """The channel's return notice: a full reversal with the fee refunded; a repeated notice is harmless."""
        m = self.payout_orders[key]
        if m.reversal is None and m.status != "SUCCESS":
            with pytest.raises(payout_services.PayoutActionRefused):
                payout_services.payout_channel_returned(platform_order_no=key)
            return
        if m.reversal is None:
            self.cover("reversal: channel return")
            self._reverse(m, m.amount, m.fee)
        payout = payout_services.payout_channel_returned(platform_order_no=key)
        assert (payout.reversal_amount, payout.fee_refund) == m.reversal

    # --- invariants, after every step ------------------------------------------------------------------------

    @invariant()
    def ledger_equals_model(self):
        """After every step, in one round trip: the ledger's invariants and equality with the model."""
        with connection.cursor() as cursor:
            cursor.execute(STATE_SQL)
            accounts, currency_sums, holds, postings, resolved_twice, collections, payouts = cursor.fetchone()

        # Per-currency zero sum of all entries.
        assert [row for row in currency_sums if row[1] != 0] == []
        # Cached balances equal the sum of their entries.
        assert [row for row in accounts if row[3] != row[4]] == []
        # No merchant balance below zero.
        assert [row for row in accounts if row[0] is not None and row[3] < 0] == []
        # Every balance (merchant available/settling/frozen and the platform's accounts) equals the model.
        actual = {(merchant_id, currency, kind): balance
                  for merchant_id, currency, kind, balance, _ in accounts if balance}
        assert actual == {key: balance for key, balance in self.balances.items() if balance}

        # Each hold is amount + fee and resolved as the model says, at most once; frozen = sum of open holds.
        assert resolved_twice == []
        assert {cause: (status, amount, merchant_id, currency) for cause, status, amount, merchant_id, currency
                in holds} == {key: (m.hold, m.amount + m.fee, self.merchant(m.merchant).pk, m.currency)
                              for key, m in self.payout_orders.items()}
        open_holds: dict[tuple, int] = defaultdict(int)
        for _, status, amount, merchant_id, currency in holds:
            if status == "held":
                open_holds[(merchant_id, currency, "frozen")] += amount
        assert dict(open_holds) == {key: balance for key, balance in actual.items() if key[2] == "frozen"}

        # Postings per kind: a refused or repeated call posted nothing.
        assert dict(postings) == {kind: n for kind, n in self.postings.items() if n}

        # Order states.
        assert {no: (status, settled) for no, status, settled in collections} == \
            {key: (m.status, m.released) for key, m in self.collection_orders.items()}
        assert {no: (status, reversal_amount, fee_refund) for no, status, reversal_amount, fee_refund in payouts} == \
            {key: (m.status, *(m.reversal or (None, None))) for key, m in self.payout_orders.items()}

    def teardown(self):
        try:
            # The platform's own checker (verify_ledger) agrees at the end of every example. Per step, the
            # invariant above checks the same properties in one query; ledger_verify costs nine.
            report = ledger_verify()
            assert report["ok"], report["failures"]
        finally:
            self.travel.stop()


# Everything the invariant reads, as JSON arrays, in a single query.
STATE_SQL = """
SELECT
  (SELECT coalesce(json_agg(json_build_array(a.merchant_id, a.currency_id, a.kind,
                                             -- a platform account caches no balance: its balance is its entries'
                                             CASE WHEN a.merchant_id IS NULL THEN coalesce(e.total, 0) ELSE a.balance END,
                                             coalesce(e.total, 0))),
                   '[]')
     FROM ledger_ledgeraccount a
     LEFT JOIN (SELECT account_id, sum(amount) AS total FROM ledger_entry GROUP BY account_id) e
       ON e.account_id = a.id),
  (SELECT coalesce(json_agg(json_build_array(currency_id, total)), '[]')
     FROM (SELECT currency_id, sum(amount) AS total FROM ledger_entry GROUP BY currency_id) c),
  (SELECT coalesce(json_agg(json_build_array(cause, status, amount, merchant_id, currency_id)), '[]')
     FROM ledger_hold),
  (SELECT coalesce(json_agg(json_build_array(kind, n)), '[]')
     FROM (SELECT kind, count(*) AS n FROM ledger_posting GROUP BY kind) p),
  (SELECT coalesce(json_agg(cause), '[]')
     FROM (SELECT cause FROM ledger_posting WHERE kind IN ('hold.release', 'hold.settle')
           GROUP BY cause HAVING count(*) > 1) r),
  (SELECT coalesce(json_agg(json_build_array(platform_order_no, status, settled_at IS NOT NULL)), '[]')
     FROM collection_collectionorder),
  (SELECT coalesce(json_agg(json_build_array(platform_order_no, status, reversal_amount, fee_refund)), '[]')
     FROM payout_payout)
"""


def _setup_world(rsa_keys) -> World:
    call_command("bootstrap", stdout=open(os.devnull, "w"))
    products = {}
    for spec in CURRENCIES.values():
        for name, kind, settlement, fee, bounds in (
            ("D0", Product.Kind.COLLECTION, Product.Settlement.D0, spec.d0_fee, spec.collection_bounds),
            ("D1", Product.Kind.COLLECTION, Product.Settlement.D1, spec.d1_fee, spec.collection_bounds),
            ("PAYOUT", Product.Kind.PAYOUT, "", spec.payout_fee, spec.payout_bounds),
        ):
            products[(spec.code, name)] = Product.objects.create(
                code=f"{spec.code}_MODEL_{name}", kind=kind, currency_id=spec.code, settlement=settlement,
                fee_fixed=fee[0], fee_rate_bps=fee[1], min_amount=bounds[0], max_amount=bounds[1])
    merchants = []
    for index in range(2):
        ctx = make_merchant(rsa_keys[index], name=f"Model {index}", currencies=tuple(CURRENCIES))
        for product in products.values():
            MerchantProduct.objects.create(merchant=ctx.merchant, product=product)
        for spec in CURRENCIES.values():
            MerchantCurrency.objects.filter(merchant=ctx.merchant, currency_id=spec.code).update(
                payout_review_threshold=spec.review_threshold,
                payout_dual_approval_threshold=spec.review_threshold * 10)
        merchants.append(ctx.merchant)
    return World(merchants=merchants, products=products)


@pytest.fixture
def quiet_dispatch(monkeypatch):
    """Nothing consumes Celery here: the on-commit dispatches and the sandbox channel's scheduling are no-ops.
    The money code runs unchanged; the machine calls the services the tasks would call."""
    from apps.channels.sandbox_payout import SandboxPayoutAdapter

    monkeypatch.setattr("apps.callbacks.enqueue.callback_dispatch", lambda *, event_id, merchant_id=None: True)
    monkeypatch.setattr("apps.payout.services.payout_submit_wake", lambda: None)
    monkeypatch.setattr("apps.payout.services.payout_submit_dispatch", lambda *, payout_id: None)
    monkeypatch.setattr(SandboxPayoutAdapter, "start_disbursement",
                        lambda self, *, payout: f"MODEL-{payout.platform_order_no}")


@pytest.mark.django_db(transaction=True)
@override_settings(PAYOUT_VELOCITY_LIMIT=2)  # configurable (docs/api.md); low, so 50 steps can reach it
def test_money_services_agree_with_an_independent_model(rsa_keys, quiet_dispatch):
    with connection.cursor() as cursor:
        # This connection only, test data only: commits need not wait for the WAL flush (a shared, slow disk
        # otherwise makes every durable service call cost an fsync). Nothing about the semantics changes.
        cursor.execute("SET synchronous_commit TO off")
    LedgerMachine.world = _setup_world(rsa_keys)
    LedgerMachine.paths = Counter()
    try:
        run_state_machine_as_test(seed(MODEL_SEED)(LedgerMachine), settings=MODEL_SETTINGS)
    except BaseException as exc:
        exc.add_note(f"Ledger model test: seed {MODEL_SEED}, {MODEL_EXAMPLES} examples of {MODEL_STEPS} steps. "
                     f"Reproduce with: MODEL_SEED={MODEL_SEED} MODEL_EXAMPLES={MODEL_EXAMPLES} "
                     f"MODEL_STEPS={MODEL_STEPS} uv run pytest tests/model -q")
        raise
    print("paths taken:", dict(sorted(LedgerMachine.paths.items())))  # shown with -s or -rP
    if MODEL_EXAMPLES * MODEL_STEPS >= 5000:
        # A full run must have taken every path this test is for; a green run that never did proves little.
        assert [path for path in REQUIRED_PATHS if not LedgerMachine.paths[path]] == []
