"""What the live soak excuses of an upstream's webhook (tests/soak/harness.py, History.excused): a 503 "upstream
unavailable" only when the platform waited its whole channel timeout for the emulator's API; a quicker 503, another
5xx, or the same answer in the sandbox deployment is a failure."""

from tests.soak.harness import History, Op

T0 = 1000.0
UNAVAILABLE = '{"error": "upstream unavailable"}'


def webhook(seconds: float, *, http: int = 503, detail: str = UNAVAILABLE, actor: str = "upstreams") -> Op:
    return Op(actor, "xendit/invoice-webhook", "690d229a94c372b6e3b3b94c", {}, T0 + 5.0, T0 + 5.0 + seconds, http,
              None, "error", None, detail)


def test_a_webhook_answered_503_after_the_whole_upstream_timeout_is_excused():
    recorded = History(T0, upstream_timeout=4.0)
    slow = webhook(4.02)

    assert recorded.failed(slow)
    assert recorded.excused(slow) == "upstream_timeout"


def test_a_quick_503_another_5xx_or_another_actor_or_the_sandbox_is_not_excused():
    live = History(T0, upstream_timeout=4.0)

    assert live.excused(webhook(0.3)) is None  # the platform did not wait for the upstream
    assert live.excused(webhook(4.5, http=500, detail="Server Error (500)")) is None
    assert live.excused(webhook(4.5, actor="merchant-0")) is None
    assert History(T0).excused(webhook(4.5)) is None  # no upstream in the sandbox deployment
