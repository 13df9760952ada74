"""A request's first transaction as its connection's health check.

With persistent connections Django checks a kept connection before a request's first statement
(`CONN_HEALTH_CHECKS`: a `SELECT 1` round trip) and replaces it if dead (docs/faults.md, drill 3). A service that is
the first use of the connection in its request can stand for that check itself: the signed API's generation read
(apps/common/refcache.py) and the hosted Pay (apps/collection/services.py), one round trip fewer per request
(docs/performance.md, "Measured changes")."""

import functools

from django.db import InterfaceError, OperationalError, transaction


def first_transaction_checks_connection(service):
    """Run a durable service (`@transaction.atomic(durable=True)`, under `retry_conflicts`), or one read, without
    Django's health check before it when the service is the first use of a kept connection. If its transaction fails
    on a dead connection, the connection is closed and the service runs once more on a new one, as Django does when
    `SELECT 1` fails. That is safe because the service is one durable transaction that is idempotent: a transaction
    cut off by a lost connection is rolled back by the server (or, lost during COMMIT, has committed, and running it
    again finds its work done), and nothing outside it was done (side effects run after commit). Any other error is
    raised as is; so is a failure on a connection that still answers."""

    @functools.wraps(service)
    def wrapper(*args, **kwargs):
        connection = transaction.get_connection()
        if (connection.connection is None or not connection.health_check_enabled or connection.health_check_done
                or connection.in_atomic_block):
            return service(*args, **kwargs)
        kept = connection.connection
        connection.health_check_done = True  # the service's first statement is the check
        try:
            return service(*args, **kwargs)
        except (OperationalError, InterfaceError):
            # A dead connection: the failed transaction's rollback failed too, and Django has already closed it (and
            # may have opened the next one); else it is checked here, on this failure only.
            if connection.connection is kept:
                if connection.is_usable():  # the connection answers: the error is the service's own
                    raise
                connection.close()
        return service(*args, **kwargs)

    return wrapper
