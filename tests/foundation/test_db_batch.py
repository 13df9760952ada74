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


def committed_elsewhere(label: str) -> bool:
    """Whether another connection sees the audit row: it was committed."""
    import psycopg

    settings = connection.settings_dict
    with psycopg.connect(host=settings["HOST"] or "127.0.0.1", port=settings["PORT"] or 5432,
                         user=settings["USER"], dbname=settings["NAME"]) as other:
        return other.execute("SELECT count(*) FROM common_auditlog WHERE actor_label = %s", [label]).fetchone()[0] > 0


@pytest.mark.django_db(transaction=True)
def test_the_last_batch_of_a_durable_block_carries_its_commit_and_django_sends_no_other():
    from psycopg.pq import TransactionStatus

    hooks = []
    with transaction.atomic(durable=True):
        transaction.on_commit(lambda: hooks.append(committed_elsewhere("carried")))
        batch = Batch()
        model_insert(audit_row("carried"), batch=batch)
        batch.add("SELECT 1", [])
        batch.run(commit=True)
        assert committed_elsewhere("carried")  # committed by the batch itself
        # no transaction left open: psycopg's commit() at the block's end sends nothing
        assert connection.connection.info.transaction_status == TransactionStatus.IDLE
    assert hooks == [True]  # on_commit callbacks still run once the block ends


@pytest.mark.django_db(transaction=True)
def test_a_batch_inside_a_nested_block_does_not_commit_the_outer_transaction():
    with pytest.raises(RuntimeError), transaction.atomic():
        with transaction.atomic():
            batch = Batch()
            model_insert(audit_row("nested"), batch=batch)
            batch.run(commit=True)
        assert not committed_elsewhere("nested")
        raise RuntimeError("the outer block rolls back")
    assert not AuditLog.objects.filter(actor_label="nested").exists()


@pytest.mark.django_db(transaction=True)
def test_a_failing_batch_with_its_commit_rolls_everything_back_and_the_connection_carries_on():
    model_insert(audit_row("first"))
    clash = AuditLog.objects.get(actor_label="first")
    with pytest.raises(IntegrityError), transaction.atomic(durable=True):
        model_insert(audit_row("before the batch"))
        batch = Batch()
        model_insert(AuditLog(pk=clash.pk, actor_label="clash", action="a", object_type="x", object_id="1"),
                     batch=batch)
        batch.run(commit=True)
    assert not AuditLog.objects.filter(actor_label__in=["before the batch", "clash"]).exists()
    model_insert(audit_row("after"))
    assert committed_elsewhere("after")


@pytest.mark.django_db(transaction=True)
def test_statements_are_prepared_once_per_session_and_again_on_a_new_connection():
    def prepared() -> set[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT name FROM pg_prepared_statements WHERE name LIKE 'batch_%%'")
            return {name for (name,) in cursor.fetchall()}

    def count(label: str) -> list:
        seen = []
        with transaction.atomic():
            batch = Batch()
            batch.add("SELECT count(*) FROM common_auditlog WHERE actor_label = %(label)s OR action = %(label)s",
                      {"label": label}, seen.append)
            batch.run()
        return seen

    connection.close()
    assert count("x") == [[(0,)]] and len(prepared()) == 1
    model_insert(audit_row("y"))
    assert count("y") == [[(1,)]] and len(prepared()) == 1  # the same statement, executed again
    connection.close()  # a new session has none: this process prepares it there again
    assert prepared() == set()
    assert count("y") == [[(1,)]] and len(prepared()) == 1


@pytest.mark.django_db
def test_locking_statements_run_after_the_others_of_their_batch_in_the_order_added(django_assert_num_queries):
    order = []
    with transaction.atomic(), django_assert_num_queries(1):
        batch = Batch()
        batch.add("SELECT 'lock'", [], lambda rows: order.append(rows[0][0]), locking=True)
        batch.add("SELECT 'first'", [], lambda rows: order.append(rows[0][0]))
        batch.add("SELECT 'write under the lock'", [], lambda rows: order.append(rows[0][0]), locking=True)
        model_insert(audit_row("beside"), batch=batch)
        batch.add("SELECT count(*)::text FROM common_auditlog WHERE actor_label = 'beside'", [],
                  lambda rows: order.append(rows[0][0]))
        batch.run()
    assert order == ["first", "1", "lock", "write under the lock"]
