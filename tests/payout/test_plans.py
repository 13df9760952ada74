"""The plans PostgreSQL keeps for payout create's prepared statements stay cheap as the tables grow.

A batched statement is prepared once per session, and after five executions PostgreSQL may keep one generic
plan for it for the rest of the session, made from what it knew then. Made on small tables without statistics
(a new database, a first deployment, autovacuum not yet run), such a plan once counted the velocity rule through
all of a merchant's payouts and joined the balance updates to every ledger account: payout create's database
time doubled over 6,000 payouts of one merchant (docs/performance.md, "Generic plans"). These tests ask for the
generic plan of every statement a payout create sends and check the access path of each table read."""

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.payout.conftest import new_payout

pytestmark = pytest.mark.django_db

# What each read of these tables may use; anything else (a sequential scan, another index) grows with the table.
EXPECTED = {
    "payout_payout": {"payout_velocity_idx"},
    "ledger_ledgeraccount": {"ledger_merchant_account_unique", "ledger_ledgeraccount_pkey"},
    "payout_denylistedaccount": {"deny_list_unique_per_currency", "deny_list_unique_any_currency"},
}


def indexes_under(plan: dict) -> set[str]:
    """The indexes a scan node uses: its own, or those of the bitmap index scans beneath a bitmap heap scan."""
    own = {plan["Index Name"]} if "Index Name" in plan else set()
    return own.union(*(indexes_under(child) for child in plan.get("Plans", [])))


def scans(plan: dict):
    if "Relation Name" in plan and plan["Node Type"].endswith("Scan"):  # not the INSERT or UPDATE node itself
        yield plan["Relation Name"], plan["Node Type"], indexes_under(plan)
    for child in plan.get("Plans", []):
        yield from scans(child)


def generic_plans_of(statements: list[str]) -> list[tuple[str, str, set[str]]]:
    executes = [part.strip() for sql in statements for part in sql.split(";\n")
                if part.strip().startswith("EXECUTE batch_")]
    assert executes, "payout create sent no prepared statement"
    found = []
    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        try:
            for execute in executes:
                cursor.execute(f"EXPLAIN (FORMAT JSON) {execute}")
                plan = cursor.fetchone()[0]
                found += scans((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"])
        finally:
            cursor.execute("RESET plan_cache_mode")
    return found


def test_every_table_payout_create_reads_is_reached_through_its_selective_index(funded):
    for n in range(3):  # history for the velocity count, and a session that has prepared everything
        new_payout(funded, payee_account=f"00123{n}")
    with CaptureQueriesContext(connection) as captured:
        new_payout(funded, payee_account="0012345")
    statements = [query["sql"] for query in captured.captured_queries]
    assert any(re.search(r"EXECUTE batch_\w+", sql) for sql in statements)

    reads = [(table, node, indexes) for table, node, indexes in generic_plans_of(statements) if table in EXPECTED]
    assert {table for table, _, _ in reads} == set(EXPECTED)  # the velocity count, accounts, deny list
    for table, node, indexes in reads:
        assert indexes and indexes <= EXPECTED[table], f"{table} read by {node} {indexes or ''} in a generic plan"
