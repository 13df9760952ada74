"""The one retry policy (apps/common/retry.py) against real PostgreSQL errors: a statement that fails with the
SQLSTATE PostgreSQL gives a deadlock victim (40P01) or a serialization failure (40001)."""

import pytest
from django.db import OperationalError, connection, transaction

from apps.common.retry import CONFLICT_ATTEMPTS, TASK_RETRY_ON, ServiceBusy, retry_conflicts

pytestmark = pytest.mark.django_db(transaction=True)


def fail_with(sqlstate: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '{sqlstate}'; END $$")


@pytest.mark.parametrize("sqlstate", ["40P01", "40001"])
def test_a_conflict_is_run_again_and_succeeds(sqlstate):
    calls = []

    @retry_conflicts
    @transaction.atomic(durable=True)
    def service():
        calls.append(1)
        if len(calls) < 3:
            fail_with(sqlstate)
        return "done"

    assert service() == "done" and len(calls) == 3


def test_a_conflict_on_every_attempt_is_a_clear_busy_answer_not_an_internal_error():
    calls = []

    @retry_conflicts
    @transaction.atomic(durable=True)
    def service():
        calls.append(1)
        fail_with("40P01")

    with pytest.raises(ServiceBusy) as raised:
        service()
    assert len(calls) == CONFLICT_ATTEMPTS
    assert (raised.value.error.code, raised.value.error.http_status) == ("1106", 429)
    assert "Retry the same request" in raised.value.msg


def test_other_database_errors_are_not_retried():
    calls = []

    @retry_conflicts
    @transaction.atomic(durable=True)
    def service():
        calls.append(1)
        fail_with("57014")  # query_canceled: not a conflict

    with pytest.raises(OperationalError):
        service()
    assert len(calls) == 1


def test_every_task_that_moves_money_has_the_retry_policy():
    from apps.channels.sandbox_payout import sandbox_payout_return, sandbox_payout_settle
    from apps.channels.tasks import reconcile_channels
    from apps.collection.tasks import expire_due_orders, open_upstream_payin, release_settlement
    from apps.payout.tasks import submit_payout, sweep_stuck_payouts

    for task in (submit_payout, sweep_stuck_payouts, sandbox_payout_settle, sandbox_payout_return, open_upstream_payin,
                 expire_due_orders, release_settlement, reconcile_channels):
        assert (task.acks_late, tuple(task.autoretry_for), task.retry_backoff) == (True, TASK_RETRY_ON, 1), task.name
        assert 0 < task.max_retries <= 5 and task.retry_backoff_max <= 30, task.name
