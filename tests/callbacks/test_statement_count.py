"""The statements of one delivery attempt are pinned, so that none is added silently (docs/callbacks.md,
"Statements per attempt"): each is one round trip and PostgreSQL work on the path every callback takes."""

from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.callbacks.deliver import callback_deliver
from apps.callbacks.models import CallbackEvent
from apps.common.refcache import refcache_scope
from apps.merchants.selectors import platform_key_current

# Claim: the due event and its merchant locked in one statement (which also reads the reference generation), the
# lease (with the bulkhead's count of the merchant's leases), the attempt row; the platform key comes from the
# reference cache. Record: the event and its merchant locked in one statement, the attempt's outcome, the event's
# outcome, the merchant's first waiting event, its hand-off. Transactions' BEGIN and COMMIT are not counted here.
# (12 before issue 23: merchant and event locked in two statements each, the leases counted apart, the platform key
# read from the database.)
STATEMENTS_PER_ATTEMPT = 8


def test_one_delivered_attempt_with_a_hand_off_runs_a_fixed_number_of_statements(
        hooked_merchant, enqueue, dispatched, django_capture_on_commit_callbacks):
    event = enqueue(hooked_merchant, no="C-count-1")
    waiting = enqueue(hooked_merchant, no="C-count-2")
    now = timezone.now()
    CallbackEvent.objects.filter(pk=event.pk).update(next_attempt_at=now - timedelta(seconds=2))
    CallbackEvent.objects.filter(pk=waiting.pk).update(next_attempt_at=now - timedelta(seconds=1), dispatched_at=None)
    callback_deliver(event_id=event.pk + 1_000_000)  # warm: nothing to claim
    with refcache_scope():
        platform_key_current()  # cached, as for every attempt of a worker after its first (until a rotation)

    with CaptureQueriesContext(connection) as queries, django_capture_on_commit_callbacks(execute=True):
        recorded = callback_deliver(event_id=event.pk)

    assert recorded.status == CallbackEvent.Status.DELIVERED
    assert dispatched == [waiting.pk]
    # The test's own transaction turns each service's transaction into a savepoint: not statements of the attempt.
    statements = [q["sql"] for q in queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]
    assert len(statements) == STATEMENTS_PER_ATTEMPT, "\n".join(sql[:160] for sql in statements)
