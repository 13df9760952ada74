"""The adapter interface's rule (apps/channels/base.py): platform_order_no is the upstream idempotency key.

Every registered adapter is held to it, so an adapter added later is covered without touching this file; it only
needs an upstream emulator below that can count what its upstream did. payout_submit relies on the rule when it
re-sends a PROCESSING payout the adapter never acknowledged."""

from dataclasses import dataclass
from typing import Callable

import pytest

from apps.channels.registry import payin_adapters, payout_adapters
from apps.collection.services import collection_create
from apps.ledger.services import balance_adjust
from apps.payout.services import payout_create
from tests.helpers import at_once


@dataclass
class Upstream:
    """What one adapter's upstream holds for an order: how many disbursements it made of it."""

    disbursements: Callable[[str], int]


def sandbox_payout_upstream(monkeypatch) -> Upstream:
    """The sandbox bank: its record of the disbursement, and the settlement it queued for it (one pays once)."""
    from apps.channels import sandbox_payout
    from apps.channels.models import SandboxDisbursement

    queued: list[str] = []
    monkeypatch.setattr(sandbox_payout.sandbox_payout_settle, "apply_async",
                        lambda *, args, countdown: queued.append(args[0]))

    def disbursements(platform_order_no: str) -> int:
        settlements = queued.count(platform_order_no)
        if settlements == 1:  # and the bank recorded the disbursement it settles
            assert SandboxDisbursement.objects.filter(platform_order_no=platform_order_no).count() == 1
        return settlements

    return Upstream(disbursements)


def xendit_payout_upstream(monkeypatch) -> Upstream:
    """Xendit's emulator behind a live deployment's Xendit payout channel: its payouts of the reference_id."""
    from django.conf import settings

    from tests.channels.conftest import PAYOUT_CODE, xendit_channel_create
    from tests.channels.xendit_emulator import XenditEmulator

    emulator = XenditEmulator().start()  # a daemon thread: it ends with the test process
    monkeypatch.setattr(settings, "PLATFORM_ENVIRONMENT", "live")  # the payouts below route to Xendit
    xendit_channel_create(code=PAYOUT_CODE, direction="payout", emulator=emulator)
    return Upstream(lambda number: len(emulator.payouts_by_reference(number)))


def paymongo_payout_upstream(monkeypatch) -> Upstream:
    """PayMongo's emulator behind a live deployment's PayMongo payout channel: its transfers of the reference_number.
    The emulator ignores the Idempotency-Key here: the adapter's own lookup by reference_number must hold alone."""
    from django.conf import settings

    from tests.channels.conftest import PAYMONGO_PAYOUT_CODE, paymongo_channel_create
    from tests.channels.paymongo_emulator import PayMongoEmulator

    emulator = PayMongoEmulator(reused_key="ignore").start()  # a daemon thread: it ends with the test process
    monkeypatch.setattr(settings, "PLATFORM_ENVIRONMENT", "live")  # the payouts below route to PayMongo
    paymongo_channel_create(code=PAYMONGO_PAYOUT_CODE, direction="payout", emulator=emulator)
    return Upstream(lambda number: len(emulator.transfers_by_reference(number)))


PAYOUT_UPSTREAMS = {"sandbox": sandbox_payout_upstream, "xendit": xendit_payout_upstream,
                    "paymongo": paymongo_payout_upstream}


def xendit_payin_upstream(monkeypatch) -> Callable[[str], int]:
    from django.conf import settings

    from tests.channels.conftest import PAYIN_CODE, xendit_channel_create
    from tests.channels.xendit_emulator import XenditEmulator

    emulator = XenditEmulator().start()  # a daemon thread: it ends with the test process
    monkeypatch.setattr(settings, "PLATFORM_ENVIRONMENT", "live")  # the orders below route to Xendit
    xendit_channel_create(code=PAYIN_CODE, direction="payin", emulator=emulator)
    return lambda number: len(emulator.invoice_by_external_id(number))


def paymongo_payin_upstream(monkeypatch) -> Callable[[str], int]:
    from django.conf import settings

    from tests.channels.conftest import PAYMONGO_PAYIN_CODE, paymongo_channel_create
    from tests.channels.paymongo_emulator import PayMongoEmulator

    emulator = PayMongoEmulator().start()  # a daemon thread: it ends with the test process
    monkeypatch.setattr(settings, "PLATFORM_ENVIRONMENT", "live")  # the orders below route to PayMongo
    paymongo_channel_create(code=PAYMONGO_PAYIN_CODE, direction="payin", emulator=emulator)
    return lambda number: len(emulator.sessions_by_reference(number))


# How many payments the upstream opened for an order (the sandbox opens nothing: one page, one reference).
PAYIN_UPSTREAMS = {"sandbox": lambda monkeypatch: (lambda number: 1), "xendit": xendit_payin_upstream,
                   "paymongo": paymongo_payin_upstream}


def payin_upstream(name: str, monkeypatch) -> Callable[[str], int]:
    assert name in PAYIN_UPSTREAMS, f"pay-in adapter {name!r} has no upstream emulator in this test: add one"
    return PAYIN_UPSTREAMS[name](monkeypatch)


def payout_upstream(name: str, monkeypatch) -> Upstream:
    assert name in PAYOUT_UPSTREAMS, f"payout adapter {name!r} has no upstream emulator in this test: add one"
    return PAYOUT_UPSTREAMS[name](monkeypatch)


def a_payout(merchant, mch_order_no: str):
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=1_000_000, reason="test funds")
    return payout_create(merchant=merchant.merchant, mch_order_no=mch_order_no, product_code="PHP_PAYOUT",
                         amount=10_000, currency="PHP", payee_name="Juan dela Cruz", payee_account="0012345678",
                         bank_code="BDO")


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(payout_adapters()))
def test_payout_adapter_submitting_one_order_twice_is_one_disbursement_with_one_reference(name, merchant,
                                                                                          monkeypatch):
    upstream = payout_upstream(name, monkeypatch)
    adapter = payout_adapters()[name]()
    payout = a_payout(merchant, "IDEM-1")
    first = adapter.start_disbursement(payout=payout)
    second = adapter.start_disbursement(payout=payout)
    assert first and second == first
    assert upstream.disbursements(payout.platform_order_no) == 1
    # Another order is another disbursement.
    other = a_payout(merchant, "IDEM-2")
    assert adapter.start_disbursement(payout=other) != first
    assert upstream.disbursements(other.platform_order_no) == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", sorted(payout_adapters()))
def test_payout_adapter_submitting_one_order_concurrently_is_one_disbursement(name, bootstrapped, rsa_keys,
                                                                              monkeypatch):
    from tests.conftest import make_merchant

    upstream = payout_upstream(name, monkeypatch)
    payout = a_payout(make_merchant(rsa_keys[0]), "IDEM-RACE")
    outcomes = at_once(lambda i: payout_adapters()[name]().start_disbursement(payout=payout), 4)
    assert [exc for _, exc in outcomes] == [None] * 4
    assert len({reference for reference, _ in outcomes}) == 1
    assert upstream.disbursements(payout.platform_order_no) == 1


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(payin_adapters()))
def test_payin_adapter_starting_one_order_twice_gives_the_same_reference(name, merchant, monkeypatch):
    opened = payin_upstream(name, monkeypatch)
    adapter = payin_adapters()[name]()
    order = collection_create(merchant=merchant.merchant, mch_order_no="IDEM-C1", product_code="PHP_COLLECT_D0",
                              amount=10_000, currency="PHP")
    first, second = adapter.start_payment(order=order), adapter.start_payment(order=order)
    assert first.upstream_reference and second.upstream_reference == first.upstream_reference
    other = collection_create(merchant=merchant.merchant, mch_order_no="IDEM-C2", product_code="PHP_COLLECT_D0",
                              amount=10_000, currency="PHP")
    assert adapter.start_payment(order=other).upstream_reference != first.upstream_reference
    assert opened(order.platform_order_no) == opened(other.platform_order_no) == 1


@pytest.mark.django_db
def test_sandbox_bank_that_cannot_queue_the_settlement_keeps_no_record_and_the_resubmission_settles(merchant,
                                                                                                  monkeypatch):
    from apps.channels import sandbox_payout
    from apps.channels.models import SandboxDisbursement

    queued: list[str] = []

    def broker_down(*, args, countdown):
        raise ConnectionError("broker down")

    payout = a_payout(merchant, "IDEM-DOWN")
    adapter = sandbox_payout.SandboxPayoutAdapter()
    monkeypatch.setattr(sandbox_payout.sandbox_payout_settle, "apply_async", broker_down)
    with pytest.raises(ConnectionError):
        adapter.start_disbursement(payout=payout)
    assert not SandboxDisbursement.objects.exists()

    monkeypatch.setattr(sandbox_payout.sandbox_payout_settle, "apply_async",
                        lambda *, args, countdown: queued.append(args[0]))
    reference = adapter.start_disbursement(payout=payout)
    assert adapter.start_disbursement(payout=payout) == reference
    assert queued == [payout.platform_order_no]
