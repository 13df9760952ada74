"""A lock on something no row stands for (a payee account, a sign-in name): PostgreSQL's transaction-scoped
advisory lock on a key's hash. The ORM has no way to say it; released at COMMIT or ROLLBACK, and safe behind
PgBouncer's transaction pooling."""

from django.db import transaction

_ADVISORY_XACT_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"


def advisory_xact_lock(key: str) -> None:
    """Wait for, then hold until the transaction ends, the lock on `key` (call inside a transaction)."""
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(_ADVISORY_XACT_LOCK, [key])
