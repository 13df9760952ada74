"""Routing between several channels of one currency and direction (docs/channels.md, "Routing"): priority, weight,
the amounts and bank codes a channel serves, its health and draining; the order records its channel and why."""

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.channels.models import Channel, ChannelHealth
from tests.collection.conftest import create_ok as pay_create_ok
from tests.payout.conftest import create, create_ok, funded  # noqa: F401 - fixture

PHP_PAYOUT = "SANDBOX_PHP_PAYOUT"


def second_channel(code: str, *, direction=Channel.Direction.PAYOUT, priority: int = 200, **fields) -> Channel:
    return Channel.objects.create(code=code, name=code, adapter="sandbox", direction=direction, currency_id="PHP",
                                  priority=priority, **fields)


def open_circuit(channel: Channel, *, seconds_ago: int = 0) -> None:
    ChannelHealth.objects.update_or_create(channel=channel, defaults={
        "state": ChannelHealth.State.OPEN, "opened_at": timezone.now() - timezone.timedelta(seconds=seconds_ago),
        "reason": "5 failures in 60 s, last: HTTP 503"})


def refused(result, code: str, words: str) -> None:
    status, body = result
    assert (status, body["code"], body["data"]) == (422, code, None), body
    assert words in body["msg"], body


def test_payout_goes_to_the_best_priority_and_records_why(client, funded):
    backup = second_channel("SANDBOX_PHP_PAYOUT_B", priority=200)
    payout = create_ok(client, funded)
    assert (payout.channel.code, payout.route_reason) == (PHP_PAYOUT, "priority 100")
    Channel.objects.filter(pk=backup.pk).update(priority=50)
    payout = create_ok(client, funded)
    assert (payout.channel, payout.route_reason) == (backup, "priority 50")


def test_an_open_circuit_sends_new_payouts_and_payins_to_the_next_channel_with_the_reason(client, funded, merchant):
    backup = second_channel("SANDBOX_PHP_PAYOUT_B")
    payin_backup = second_channel("SANDBOX_PHP_PAYIN_B", direction=Channel.Direction.PAYIN)
    open_circuit(Channel.objects.get(code=PHP_PAYOUT))
    open_circuit(Channel.objects.get(code="SANDBOX_PHP_PAYIN"))
    payout = create_ok(client, funded)
    assert payout.channel == backup
    assert payout.route_reason == "failover: SANDBOX_PHP_PAYOUT circuit open; priority 200"
    order = pay_create_ok(client, merchant, product_code="PHP_COLLECT_D0", amount=5000)
    assert (order.channel, order.route_reason) == (
        payin_backup, "failover: SANDBOX_PHP_PAYIN circuit open; priority 200")


def test_when_every_channel_is_open_the_order_waits_on_the_best_one(client, funded):
    backup = second_channel("SANDBOX_PHP_PAYOUT_B")
    main = Channel.objects.get(code=PHP_PAYOUT)
    open_circuit(main)
    open_circuit(backup)
    payout = create_ok(client, funded)
    assert payout.channel == main
    assert payout.route_reason.startswith("no healthy channel (SANDBOX_PHP_PAYOUT circuit open; "
                                          "SANDBOX_PHP_PAYOUT_B circuit open): waits for SANDBOX_PHP_PAYOUT")


def test_a_half_open_channel_takes_a_few_probe_orders_then_the_next_channel_takes_the_rest(client, funded, settings):
    settings.CHANNEL_BREAKER_PROBES = 2
    settings.CHANNEL_BREAKER_PROBE_SLICE_SECONDS = 10**6  # the four creates fall in one probe slice
    backup = second_channel("SANDBOX_PHP_PAYOUT_B")
    main = Channel.objects.get(code=PHP_PAYOUT)
    open_circuit(main, seconds_ago=settings.CHANNEL_BREAKER_COOLDOWN_SECONDS + 1)
    chosen = [create_ok(client, funded) for _ in range(4)]
    assert [p.channel for p in chosen] == [main, main, backup, backup]
    assert "probe of SANDBOX_PHP_PAYOUT (half-open)" in chosen[0].route_reason
    assert chosen[2].route_reason.startswith("failover: SANDBOX_PHP_PAYOUT circuit half-open; priority 200")


def test_amount_ranges_pick_the_channel_and_an_amount_no_channel_serves_is_1003(client, funded):
    Channel.objects.filter(code=PHP_PAYOUT).update(max_amount=100_000)
    large = second_channel("SANDBOX_PHP_PAYOUT_LARGE", min_amount=100_001, max_amount=1_000_000)
    assert create_ok(client, funded, amount=100_000).channel.code == PHP_PAYOUT
    assert create_ok(client, funded, amount=100_001).channel == large
    refused(create(client, funded, amount=1_000_001), "1003", "no payout channel serves an amount of 1000001 PHP")


def test_bank_codes_pick_the_channel_and_a_bank_no_channel_serves_is_2006(client, funded):
    Channel.objects.filter(code=PHP_PAYOUT).update(bank_codes=["GCASH", "MAYA"])
    assert create_ok(client, funded, bank_code="GCASH").channel.code == PHP_PAYOUT
    refused(create(client, funded, bank_code="BDO"), "2006", "no payout channel serves bank_code BDO")
    banks = second_channel("SANDBOX_PHP_PAYOUT_BANKS", bank_codes=["BDO"])
    assert create_ok(client, funded, bank_code="BDO").channel == banks
    # a code outside the table is still the table's 2006, before any channel is asked
    refused(create(client, funded, bank_code="NOPE"), "2006", "not in the PHP bank code table")


def test_a_drained_channel_takes_no_new_orders_and_draining_every_channel_is_1001(client, funded):
    backup = second_channel("SANDBOX_PHP_PAYOUT_B")
    Channel.objects.filter(code=PHP_PAYOUT).update(is_draining=True)
    assert create_ok(client, funded).channel == backup
    Channel.objects.filter(pk=backup.pk).update(is_draining=True)
    refused(create(client, funded), "1001", "no serving payout channel")


def test_equal_priorities_share_new_orders_by_weight(client, funded):
    Channel.objects.filter(code=PHP_PAYOUT).update(weight=1)
    heavy = second_channel("SANDBOX_PHP_PAYOUT_B", priority=100, weight=999)
    chosen = [create_ok(client, funded).channel for _ in range(12)]
    assert chosen.count(heavy) >= 9
    assert create_ok(client, funded).route_reason in ("priority 100, weight 999 of 1000",
                                                      "priority 100, weight 1 of 1000")


def test_the_route_reads_no_channel_row_while_nothing_changes(client, funded):
    """The candidates (channels and their health) are cached reference data: a second create asks the database
    for none of them."""
    from apps.channels.routing import order_route
    from apps.merchants.models import Product

    second_channel("SANDBOX_PHP_PAYOUT_B")
    order_route(merchant_id=funded.merchant.pk, kind=Product.Kind.PAYOUT, currency="PHP", product_code="PHP_PAYOUT",
                amount=10000, bank_code="BDO")
    with CaptureQueriesContext(connection) as queries:
        route = order_route(merchant_id=funded.merchant.pk, kind=Product.Kind.PAYOUT, currency="PHP",
                            product_code="PHP_PAYOUT", amount=10000, bank_code="BDO")
    # outside a request each cached lookup reads the one-row generation only (a request reads it once)
    assert queries.captured_queries and all("common_referencegeneration" in q["sql"] for q in queries.captured_queries)
    assert route.reason == "priority 100"


def test_a_circuit_opened_by_another_process_is_seen_by_the_next_create(client, funded):
    """The breaker's row feeds the cached candidates: its write bumps the reference generation (the trigger)."""
    backup = second_channel("SANDBOX_PHP_PAYOUT_B")
    assert create_ok(client, funded).channel.code == PHP_PAYOUT  # warms the cache
    main = Channel.objects.get(code=PHP_PAYOUT)
    ChannelHealth.objects.create(channel=main)
    ChannelHealth.objects.filter(channel=main).update(state=ChannelHealth.State.OPEN, opened_at=timezone.now())
    assert create_ok(client, funded).channel == backup
    ChannelHealth.objects.filter(channel=main).update(state=ChannelHealth.State.CLOSED, opened_at=None)
    assert create_ok(client, funded).channel == main
