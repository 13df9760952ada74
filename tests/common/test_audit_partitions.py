"""The action audit by month (docs/architecture.md, "Partitioned history"): a payout's trail reads the months since
the payout only, and retention keeps the statutory years and, past them, a month still holding the trail of a payout
in flight."""

import re
from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from apps.common.models import AuditLog
from apps.common.partitions import partitions_create, partitions_drop_expired
from apps.payout import services
from apps.payout.selectors import payout_decisions
from tests.conftest import _partitions_for_the_suite
from tests.payout.conftest import adapter_calls, fund, payout_in  # noqa: F401 - adapter_calls is a fixture

TABLE = "common_auditlog"
PARTITION = re.compile(rf"\b{TABLE}_(\d{{4}}_[a-z]{{3}})\b")


def _partitions() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                       "WHERE i.inhparent = %s::regclass", [TABLE])
        return {row[0].removeprefix(f"{TABLE}_") for row in cursor.fetchall()}


def _partitions_read(sql: str) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}")
        return {match for (line,) in cursor.fetchall() for match in PARTITION.findall(line)}


# --- the hot reads name their months -----------------------------------------------------------------------------

@pytest.mark.parametrize(("created", "read", "months"), [
    (datetime(2026, 3, 16, 12, tzinfo=UTC), datetime(2026, 3, 16, 12, 5, tzinfo=UTC), {"2026_mar"}),
    (datetime(2026, 2, 16, 12, tzinfo=UTC), datetime(2026, 3, 16, 12, tzinfo=UTC), {"2026_feb", "2026_mar"}),
])
def test_a_payouts_trail_reads_the_months_since_the_payout_only(merchant, adapter_calls, time_machine,  # noqa: F811
                                                                created, read, months):
    time_machine.move_to(created, tick=False)
    fund(merchant, 1_000_000)
    payout = payout_in(merchant, "SUCCESS")
    assert {"2026_jan", "2026_feb", "2026_mar", "2026_apr"} <= _partitions()  # neighbours a scan would read
    time_machine.move_to(read, tick=False)

    with CaptureQueriesContext(connection) as queries:
        trail = payout_decisions(payout)

    assert [row.action for row in trail] == ["payout.create", "payout.submit", "payout.paid"]
    on_audit = [q["sql"] for q in queries if TABLE in q["sql"]]
    assert len(on_audit) == 1, on_audit
    assert _partitions_read(on_audit[0]) == months


# --- retention ---------------------------------------------------------------------------------------------------

def _months(*moments: datetime) -> None:
    for moment in moments:
        partitions_create(now=moment)


def _audit_dropped(retention) -> list[str]:
    return [name.removeprefix(f"{TABLE}_") for name in retention.dropped if name.startswith(TABLE)]


def test_the_audit_is_kept_ten_years_and_the_month_before_them_is_dropped(far_months, merchant, settings,
                                                                         time_machine):
    settings.PARTITIONS_AHEAD_MONTHS = 0
    assert settings.AUDIT_LOG_RETENTION_MONTHS == 120
    jan, feb, now = (datetime(2039, 1, 15, tzinfo=UTC), datetime(2039, 2, 1, tzinfo=UTC),
                     datetime(2049, 1, 20, tzinfo=UTC))
    _months(jan, feb, now)
    for moment in (jan, feb):
        time_machine.move_to(moment, tick=False)
        fund(merchant, 1_000)  # a balance adjustment: its audit row is written in that month

    retention = partitions_drop_expired(now=now)

    assert _audit_dropped(retention) == ["2039_jan"]
    assert "2039_jan" not in _partitions() and "2039_feb" in _partitions()  # the 120th month back is kept
    assert AuditLog.objects.filter(action="balance.adjust", created_at__year=2039).count() == 1
    assert _audit_dropped(partitions_drop_expired(now=now)) == []


def test_retention_keeps_a_month_holding_the_trail_of_a_payout_in_flight(far_months, merchant, settings,
                                                                         adapter_calls, time_machine):  # noqa: F811
    settings.PARTITIONS_AHEAD_MONTHS, settings.AUDIT_LOG_RETENTION_MONTHS = 0, 12
    old, now = datetime(2039, 1, 15, tzinfo=UTC), datetime(2040, 1, 20, tzinfo=UTC)
    _months(old, now)
    time_machine.move_to(old, tick=False)
    fund(merchant, 1_000_000)
    in_flight = payout_in(merchant, "PROCESSING")  # submitted in January 2039; its bank never answered
    time_machine.move_to(now, tick=False)

    retention = partitions_drop_expired(now=now)

    assert _audit_dropped(retention) == []
    assert retention.kept == {f"{TABLE}_2039_jan": f"it holds the trail of payout {in_flight.pk}, which is not final"}
    assert [row.action for row in payout_decisions(in_flight)] == ["payout.create", "payout.submit"]

    services.payout_channel_result(platform_order_no=in_flight.platform_order_no, outcome="paid", fail_reason="")
    assert _audit_dropped(partitions_drop_expired(now=now)) == ["2039_jan"]  # final: gone on the next run
    assert [row.action for row in payout_decisions(in_flight)] == ["payout.create", "payout.paid"]


# --- the migration -----------------------------------------------------------------------------------------------

@pytest.fixture
def suite_months_again(transactional_db):
    yield
    _partitions_for_the_suite()


def _audit_rows() -> list[tuple]:
    return sorted(AuditLog.objects.values_list("id", "created_at", "action", "object_id", "new"))


def _refused_change(row_id: int) -> bool:
    try:
        with transaction.atomic():
            AuditLog.objects.filter(pk=row_id).update(reason="changed")
    except DatabaseError:
        return True
    return False


def test_the_migration_moves_existing_audit_rows_both_ways_and_keeps_them_append_only(suite_months_again, merchant,
                                                                                     time_machine):
    now = datetime.now(UTC)
    for moment in (datetime(2026, 1, 5, tzinfo=UTC), datetime(2026, 2, 5, tzinfo=UTC), datetime(2026, 2, 20, tzinfo=UTC)):
        time_machine.move_to(moment, tick=False)
        fund(merchant, 1_000)
    time_machine.move_to(now)
    before = _audit_rows()
    assert [row[2] for row in before].count("balance.adjust") == 3  # beside the merchant's own set-up rows

    call_command("migrate", "common", "0012", verbosity=0)
    assert _partitions() == set() and _audit_rows() == before
    assert _refused_change(before[0][0])
    call_command("migrate", "common", verbosity=0)

    assert _audit_rows() == before
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tableoid::regclass::text, count(*) FROM {TABLE} GROUP BY 1")
        by_partition = dict(cursor.fetchall())
    assert (by_partition[f"{TABLE}_2026_jan"], by_partition[f"{TABLE}_2026_feb"]) == (1, 2)
    assert sum(by_partition.values()) == len(before)
    assert _refused_change(before[0][0])
    fund(merchant, 1_000)  # the identity goes on after the moved rows
    assert AuditLog.objects.latest("id").pk > max(row[0] for row in before)
