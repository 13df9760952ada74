"""apps.common.db.Batch: statements in one round trip on PostgreSQL, in order, each seeing what came before."""

import threading

import pytest
from django.db import IntegrityError, connection, transaction

from apps.common.db import Batch, ids_reserve, model_insert
from apps.common.models import AuditLog
from apps.ledger.models import Hold, Posting


def audit_row(label: str) -> AuditLog:
    return AuditLog(actor_label=label, action="test.batch", object_type="x", object_id="1")


@pytest.mark.django_db
def test_a_batch_is_one_round_trip_and_hands_each_statement_its_rows_in_order(django_assert_num_queries):
    seen = []
    with transaction.atomic(), django_assert_num_queries(1):
        batch = Batch()
        batch.add("SELECT %s::int, %s::text", [1, "it's 100%"], seen.append)
        batch.add("SELECT 2 WHERE false", [], seen.append)
        first = model_insert(audit_row("batched"), batch=batch)
        assert first.pk is None  # not written yet
        batch.add("SELECT count(*) FROM common_auditlog WHERE actor_label = %s", ["batched"], seen.append)
        batch.run()
    assert seen == [[(1, "it's 100%")], [], [(1,)]]  # the count ran after the INSERT before it
    assert AuditLog.objects.get(pk=first.pk).actor_label == "batched"


@pytest.mark.django_db
def test_reserved_ids_are_distinct_and_used_by_the_rows_written(django_assert_num_queries):
    with transaction.atomic():
        reads = Batch()
        ids = ids_reserve(reads, AuditLog, Hold, Posting)
        again = ids_reserve(reads, AuditLog)
        assert ids == [None, None, None]
        reads.run()
        assert all(isinstance(value, int) for value in ids) and again[0] != ids[0]
        row = model_insert(AuditLog(pk=ids[0], actor_label="reserved", action="a", object_type="x", object_id="1"))
    assert AuditLog.objects.get(actor_label="reserved").pk == row.pk == ids[0]


@pytest.mark.django_db(transaction=True)
def test_an_error_in_a_later_statement_raises_and_rolls_back_the_earlier_ones():
    model_insert(audit_row("first"))
    clash = AuditLog.objects.get(actor_label="first")
    with pytest.raises(IntegrityError), transaction.atomic():
        batch = Batch()
        model_insert(audit_row("rolled back"), batch=batch)
        model_insert(AuditLog(pk=clash.pk, actor_label="clash", action="a", object_type="x", object_id="1"),
                     batch=batch)
        batch.run()
    assert not AuditLog.objects.filter(actor_label__in=["rolled back", "clash"]).exists()
    assert AuditLog.objects.filter(actor_label="first").exists()  # the connection is usable afterwards


@pytest.mark.django_db(transaction=True)
def test_a_read_after_a_lock_in_one_batch_sees_what_the_lock_holder_committed(merchant):
    """The payout create guarantee: the risk read, batched after the balance lock, counts the create that held
    the lock (a statement's snapshot is taken when it starts, after the statement before it waited)."""
    from apps.ledger.models import LedgerAccount

    account = LedgerAccount.objects.filter(merchant=merchant.merchant).order_by("id").first()
    holder_locked, release = threading.Event(), threading.Event()

    def holder():
        try:
            with transaction.atomic():
                LedgerAccount.objects.select_for_update().get(pk=account.pk)
                holder_locked.set()
                release.wait(10)
                model_insert(audit_row("committed while waited for"))
        finally:
            connection.close()

    thread = threading.Thread(target=holder)
    thread.start()
    assert holder_locked.wait(10)
    seen = []
    with transaction.atomic():
        batch = Batch()
        batch.add("SELECT id FROM ledger_ledgeraccount WHERE id = %s FOR UPDATE", [account.pk])
        batch.add("SELECT count(*) FROM common_auditlog WHERE actor_label = %s", ["committed while waited for"],
                  seen.append)
        threading.Timer(0.3, release.set).start()  # the holder commits while this batch waits on the lock
        batch.run()
    thread.join(10)
    assert seen == [[(1,)]]
