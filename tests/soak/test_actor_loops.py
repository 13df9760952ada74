"""An actor of the soak acts until the load ends, however long the run is: `make soak SOAK_SECONDS=3600` is an hour
of load, not as many rounds as a short run needs. Without a platform: the soak's methods are stand-ins that count
what the actor asked for, and its pauses take no time."""

import random
from types import SimpleNamespace

from tests.soak import harness


def _soak(rounds: int, **methods) -> tuple[SimpleNamespace, list]:
    """A soak whose load runs until the stand-ins have recorded `rounds` requests in the returned list."""
    asked: list = []
    soak = SimpleNamespace(running=lambda: len(asked) < rounds, opts=SimpleNamespace(seed=7), **methods)
    return soak, asked


def test_a_merchant_keeps_creating_orders_until_the_load_ends(monkeypatch):
    monkeypatch.setattr(harness.time, "sleep", lambda seconds: None)
    soak, asked = _soak(12_000, remember=lambda *args: None, accepted_of=lambda merchant, kind: [])

    def api(actor, merchant, path, params, *, timeout=20):
        asked.append(path)
        return harness.Op(actor, path, params["mch_order_no"], params, 0.0)

    soak.api = api
    harness.merchant_actor(soak, "m0", merchant=None, rng=random.Random(1))

    assert len(asked) >= 12_000  # stopped by the end of the load, not by a count of its own


def test_a_payer_keeps_coming_for_orders_until_the_load_ends(monkeypatch):
    soak, asked = _soak(5_000)
    soak.next_payin = lambda rng, seen: asked.append("next") and None  # no order yet: the payer asks again

    harness.payer_actor(soak, "p0", rng=random.Random(1))

    assert len(asked) == 5_000
