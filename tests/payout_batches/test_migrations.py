"""The batch payouts' app is `apps.payout_batches` under the Django label `merchant_payouts` (apps/payout_batches/
apps.py): a database migrated under the app's earlier package name, with its batches and rows, migrates forward
and reads them back, and a fresh database migrates to the same tables."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.payout_batches.models import PayoutBatch, PayoutBatchRow
from tests.portal.support import portal_user

pytestmark = pytest.mark.django_db(transaction=True)

# The app's migrations as a database made before the package was renamed records them (django_migrations.app).
EARLIER = [("merchant_payouts", "0001_initial")]


def _executor() -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    return executor


def test_a_batch_written_under_the_earlier_app_is_read_after_migrating_forward(merchant):
    maker = portal_user(merchant, "finance")
    executor = _executor()
    executor.migrate([("merchant_payouts", None)])  # the app's tables gone: then made as the earlier app made them
    try:
        executor = _executor()
        executor.migrate(EARLIER)
        earlier = _executor().loader.project_state(EARLIER).apps
        Batch, Row = earlier.get_model("merchant_payouts", "PayoutBatch"), earlier.get_model("merchant_payouts",
                                                                                              "PayoutBatchRow")
        batch = Batch.objects.create(merchant_id=merchant.merchant.pk, source="csv", file_name="june.csv",
                                     file_sha256="ab" * 32, status="PENDING", row_count=1, note="June suppliers",
                                     created_by_id=maker.pk)
        Row.objects.create(batch=batch, merchant_id=merchant.merchant.pk, line=1, mch_order_no="JUNE-1",
                           product_code="PHP_PAYOUT", amount=125_000, currency="PHP", payee_name="Juan Dela Cruz",
                           payee_account="0012345678", bank_code="BDO")
    finally:
        executor = _executor()
        executor.migrate(executor.loader.graph.leaf_nodes())

    assert _executor().migration_plan(_executor().loader.graph.leaf_nodes()) == []  # nothing left to apply
    moved = PayoutBatch.objects.get(pk=batch.pk)
    assert (moved.merchant_id, moved.file_name, moved.note, moved.status, moved.created_by_id) == (
        merchant.merchant.pk, "june.csv", "June suppliers", PayoutBatch.Status.PENDING, maker.pk)
    [row] = PayoutBatchRow.objects.filter(batch=moved)
    assert (row.mch_order_no, row.amount, row.currency, row.payee_name) == ("JUNE-1", 125_000, "PHP", "Juan Dela Cruz")


def test_a_fresh_database_has_the_app_migrated_into_the_tables_it_always_had():
    """The suite's database is made by migrate from nothing: the app's migrations are recorded under its label and
    its models use the tables an existing database holds, so neither needs a rename."""
    executor = _executor()
    applied = executor.loader.applied_migrations
    assert ("merchant_payouts", "0001_initial") in applied
    assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == []
    assert (PayoutBatch._meta.db_table, PayoutBatchRow._meta.db_table) == (
        "merchant_payouts_payoutbatch", "merchant_payouts_payoutbatchrow")
    assert {"merchant_payouts_payoutbatch", "merchant_payouts_payoutbatchrow"} <= set(
        connection.introspection.table_names())
