"""Test data built once for many tests, as Django's `TestCase.setUpTestData` does (docs/testing.md, "Built once").

`one_transaction(django_db_blocker)` opens a transaction around a module-scoped fixture and rolls it back when the
fixture ends. Each test's own `db` transaction (pytest-django's, a `TestCase` atomic) then becomes a savepoint inside
it: the test sees the fixture's rows, and whatever it writes is rolled back to them before the next test, exactly as a
fixture built inside every test would be. `fresh(objects)` hands each test deep copies of the fixture's objects (a
test may change an instance without the next test seeing it; setUpTestData deep-copies its class attributes the same
way).

Only for tests in pytest-django's `db` (not `transaction=True`: its flush would empty the tables under the outer
transaction). What the fixture does not carry over from a build per test: Redis (each test starts with it cleared, as
before) and PostgreSQL's `now()` (the outer transaction's start; the application takes its times from Python's clock).
"""

import copy
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import transaction


@contextmanager
def one_transaction(django_db_blocker) -> Iterator[None]:
    """Database access and one transaction for a module-scoped fixture; everything it wrote rolled back at the end."""
    from django.core.cache import cache

    with django_db_blocker.unblock():
        cache.clear()  # as a build in each test had it (tests/conftest.py: _clear_cache ran first)
        atomic = transaction.atomic()
        atomic._from_testcase = True  # as TestCase's own blocks: the code's durable blocks may nest in it, as in a test
        atomic.__enter__()
        try:
            yield
        finally:
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


def fresh(objects):
    """Deep copies of the objects built once: a test's changes to an instance stay with the test."""
    return copy.deepcopy(objects)
