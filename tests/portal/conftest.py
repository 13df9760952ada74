"""Two merchants with real orders and callbacks, made through the services as the API would: A (the `merchant`
fixture, PHP and USD) and B (`other_merchant`, PHP). Portal tests check that A's people see A's and never B's."""

from dataclasses import dataclass

import pytest

from apps.callbacks.deliver import callback_deliver
from apps.callbacks.models import CallbackEvent
from apps.collection.models import CollectionOrder
from apps.collection.services import collection_create, collection_notify_paid
from apps.ledger.services import balance_adjust
from apps.payout import services as payout_services
from apps.payout.models import Payout
from tests.support.receiver import Reply


@dataclass
class Shop:
    ctx: object  # MerchantCtx
    payin: CollectionOrder
    payout: Payout
    event: CallbackEvent  # the pay-in's collection.success callback, dead after one failed attempt

    @property
    def merchant(self):
        return self.ctx.merchant


@pytest.fixture
def dispatched(monkeypatch):
    """Callback events handed to the broker are recorded instead; the test delivers them itself."""
    from apps.callbacks import tasks

    ids: list[int] = []
    monkeypatch.setattr(tasks.deliver_callback, "delay", lambda event_id: ids.append(event_id))
    return ids


@pytest.fixture
def sandbox_payouts(monkeypatch):
    from apps.channels.sandbox_payout import SandboxPayoutAdapter

    monkeypatch.setattr(SandboxPayoutAdapter, "start_disbursement",
                        lambda self, *, payout: f"REF-{payout.platform_order_no}")


def make_shop(ctx, receiver, prefix: str) -> Shop:
    merchant = ctx.merchant
    merchant.collection_callback_url = receiver.url
    merchant.payout_callback_url = receiver.url
    merchant.save(update_fields=["collection_callback_url", "payout_callback_url"])
    balance_adjust(merchant_no=ctx.merchant_no, currency="PHP", amount=10_000_000, reason="test top-up")
    order = collection_create(merchant=merchant, mch_order_no=f"{prefix}-IN-1", product_code="PHP_COLLECT_D0",
                              amount=25_000, currency="PHP")
    collection_notify_paid(platform_order_no=order.platform_order_no)
    order.refresh_from_db()
    payout = payout_services.payout_create(merchant=merchant, mch_order_no=f"{prefix}-OUT-1",
                                           product_code="PHP_PAYOUT", amount=12_345, currency="PHP",
                                           payee_name="Juan dela Cruz", payee_account="0012345678", bank_code="BDO")
    payout_services.payout_submit(payout_id=payout.pk)
    payout.refresh_from_db()
    receiver.script(Reply(500, "boom"))
    event = CallbackEvent.objects.get(merchant=merchant, platform_order_no=order.platform_order_no)
    event = callback_deliver(event_id=event.pk)
    return Shop(ctx, order, payout, event)


@pytest.fixture
def shops(merchant, other_merchant, callback_receiver, dispatched, sandbox_payouts, settings):
    settings.CALLBACK_RETRY_DELAYS_SECONDS = []  # one failed attempt makes the event dead
    a = make_shop(merchant, callback_receiver, "A")
    b = make_shop(other_merchant, callback_receiver, "B")
    settings.CALLBACK_RETRY_DELAYS_SECONDS = [15, 60, 300, 1800, 7200, 21600, 43200, 86400]
    assert a.event.status == b.event.status == CallbackEvent.Status.DEAD
    return a, b


# --- the people of a merchant, as the services of the developers page and payouts by hand take them ------------

@pytest.fixture
def team(merchant):
    """The merchant's people, one per role, plus a second owner (the checker of the first owner's batches)."""
    from tests.portal.team import member

    m = merchant.merchant
    return {"owner": member(m, "owner"), "owner2": member(m, "owner", f"owner2@{m.merchant_no.lower()}.example"),
            "finance": member(m, "finance"), "developer": member(m, "developer"), "viewer": member(m, "viewer")}


@pytest.fixture
def other_team(other_merchant):
    from tests.portal.team import member

    m = other_merchant.merchant
    return {"owner": member(m, "owner"), "finance": member(m, "finance")}
