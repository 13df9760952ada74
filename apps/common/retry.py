"""The one retry policy of the platform (docs/ledger.md, "Lock order and retries").

Two callers, one definition of what is transient:

- `retry_conflicts` wraps a durable service (`@retry_conflicts` above `@transaction.atomic(durable=True)`): a
  deadlock or a serialization failure rolled the whole transaction back, so it is run again, a bounded number of
  times with a short jittered backoff; then `ServiceBusy` (a DomainError: the API answers 1106/429, the admin, the
  pay page and the CLI say "try again"), never a 500. Web requests and tasks alike get it.
- `money_task` is `shared_task` for every task that moves money: a lost connection (and a conflict that outlived
  `retry_conflicts`) is retried by Celery with exponential backoff, bounded; the sweepers finish what still fails.

Countdowns stay short (seconds, well under the Redis broker's visibility timeout of an hour): with acks_late a
message is acknowledged only after the task ends, and a countdown longer than the visibility timeout would be
delivered twice (pretix's remark, STYLE.md). RabbitMQ, production's broker, has no visibility timeout, and its
delayed delivery counts whole seconds (docs/architecture.md, "The broker"). Long waits belong to the sweepers, not to
broker countdowns.
"""

import functools
import logging
import random
import time

from celery import shared_task
from django.db import InterfaceError, OperationalError, transaction

from apps.common.errors import DomainError, ErrorCode

logger = logging.getLogger(__name__)

# SQLSTATE 40P01 deadlock_detected, 40001 serialization_failure: PostgreSQL rolled the transaction back; running it
# again is safe and usually succeeds at once.
CONFLICT_SQLSTATES = frozenset({"40P01", "40001"})

CONFLICT_ATTEMPTS = 4  # the first try and three retries: 20 + 40 + 80 ms (+ jitter) of backoff at most
CONFLICT_BACKOFF_SECONDS = 0.02

TASK_MAX_RETRIES = 5  # then the task fails and the sweepers finish the order
TASK_BACKOFF_SECONDS = 1  # 1, 2, 4, 8, 16 s (jittered): within a minute, far below the visibility timeout
TASK_BACKOFF_MAX_SECONDS = 30


class ServiceBusy(DomainError):
    """A deadlock or serialization failure outlived every retry: nothing was committed; the caller may try again."""

    def __init__(self, msg: str = "The order is being changed by another request at this moment; nothing was "
                                  "changed. Retry the same request."):
        super().__init__(ErrorCode.RATE_LIMITED, msg)


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a database error (Django wraps psycopg's error; the original is its __cause__)."""
    for error in (exc, exc.__cause__):
        state = getattr(error, "sqlstate", None)
        if state:
            return state
    return None


def is_conflict(exc: BaseException) -> bool:
    """A deadlock or a serialization failure: the transaction was rolled back and may simply run again."""
    return isinstance(exc, OperationalError) and sqlstate(exc) in CONFLICT_SQLSTATES


def retry_conflicts(service):
    """Run a durable service again when PostgreSQL rolled it back for a deadlock or serialization failure; after
    CONFLICT_ATTEMPTS, ServiceBusy. Only around a durable transaction (nothing outside it was done and nothing
    of it was committed), so a retry never does anything twice."""

    @functools.wraps(service)
    def wrapper(*args, **kwargs):
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            try:
                return service(*args, **kwargs)
            except OperationalError as exc:
                if not is_conflict(exc) or transaction.get_connection().in_atomic_block:
                    raise
                if attempt == CONFLICT_ATTEMPTS:
                    logger.error("%s: %s on each of %d attempts; answered busy", service.__qualname__,
                                 sqlstate(exc), attempt)
                    raise ServiceBusy() from exc
                logger.warning("%s: %s (attempt %d of %d); retrying", service.__qualname__, sqlstate(exc), attempt,
                               CONFLICT_ATTEMPTS)
                time.sleep(CONFLICT_BACKOFF_SECONDS * 2 ** (attempt - 1) * (1 + random.random()))
        raise AssertionError("unreachable")

    return wrapper


# What a money-moving task retries on: a lost connection (OperationalError / InterfaceError; Celery's Django fixup
# closes an unusable connection before the next run) and a conflict retry_conflicts gave up on.
TASK_RETRY_ON = (OperationalError, InterfaceError, ServiceBusy)


def money_task(*args, **options):
    """`shared_task` with the platform's retry policy for tasks that move money: acks_late, and on TASK_RETRY_ON a
    retry with exponential, jittered backoff, at most TASK_MAX_RETRIES times."""
    policy = {"acks_late": True, "autoretry_for": TASK_RETRY_ON, "max_retries": TASK_MAX_RETRIES,
              "retry_backoff": TASK_BACKOFF_SECONDS, "retry_backoff_max": TASK_BACKOFF_MAX_SECONDS,
              "retry_jitter": True, **options}
    if args and callable(args[0]):
        return shared_task(**policy)(args[0])
    return shared_task(*args, **policy)
