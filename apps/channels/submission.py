"""One of our workers at a time sends a given order upstream (UpstreamSubmissionLease): a short lease claimed and
released in transactions of their own, never held in a transaction across HTTP calls (nor a session advisory lock,
which PgBouncer's transaction pooling would break). A holder that died leaves a lease that simply expires.

Used around a whole payout submission with its failover (apps.payout.failover.payout_send: two workers sending one
payout at once could otherwise each reach a different upstream), and by PayMongo's adapter around "look the transfer
up, then create it" under its own key."""

import time
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.channels.base import UpstreamUnavailable
from apps.channels.models import UpstreamSubmissionLease


@contextmanager
def one_submission_at_a_time(key: str, *, calls: int, wait: bool = True):
    """Hold the lease on `key` (an order number, or a prefixed one) for the block, which receives `renew`: the lease
    lasts `calls` HTTP timeouts (CHANNEL_HTTP_TIMEOUT_SECONDS) from its claim or its last renew(), so a block that
    makes several rounds of calls renews it before each, and a holder that died frees it within one round. A second
    worker waits for the first to finish (then sees what it did), or with `wait=False` gives up at once; either way a
    lease it cannot have raises UpstreamUnavailable, so the caller retries later as after any ambiguous failure."""
    lease = timedelta(seconds=settings.CHANNEL_HTTP_TIMEOUT_SECONDS * calls)
    deadline = time.monotonic() + lease.total_seconds()
    while True:
        until = _lease_claim(key, lease)
        if until is not None:
            break
        if not wait or time.monotonic() > deadline:
            raise UpstreamUnavailable(f"another submission of {key} is still under way")
        time.sleep(0.05)
    held = [until]

    def renew(calls: int | None = None) -> None:
        """Extend the lease by `calls` HTTP timeouts from now (the claim's number when None)."""
        later = timezone.now() + (lease if calls is None else timedelta(
            seconds=settings.CHANNEL_HTTP_TIMEOUT_SECONDS * calls))
        if not UpstreamSubmissionLease.objects.filter(platform_order_no=key, leased_until=held[0]).update(
                leased_until=later):
            raise UpstreamUnavailable(f"the lease on {key} ran out and was taken")
        held[0] = later

    try:
        yield renew
    finally:
        UpstreamSubmissionLease.objects.filter(platform_order_no=key, leased_until=held[0]).update(
            leased_until=timezone.now())


def _lease_claim(key: str, lease: timedelta) -> datetime | None:
    """The lease's new expiry if this call took it (free, or its holder's time ran out), else None."""
    now = timezone.now()
    until = now + lease
    with transaction.atomic():
        _, created = UpstreamSubmissionLease.objects.get_or_create(platform_order_no=key,
                                                                   defaults={"leased_until": until})
    if created:
        return until
    taken = UpstreamSubmissionLease.objects.filter(platform_order_no=key, leased_until__lte=now).update(
        leased_until=until)
    return until if taken else None
