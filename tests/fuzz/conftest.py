"""Fuzzing budget and fixtures: the OpenAPI schema served by the Django app in-process, a funded merchant.

FUZZ_EXAMPLES scales every fuzz test (default: the CI budget); FUZZ_RANDOM=1 drops the fixed derandomized
seed so each local run explores new inputs (Hypothesis prints how to reproduce a failure). See docs/fuzzing.md.
"""

import os
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, settings

from apps.ledger.services import balance_adjust

FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "100"))
FUZZ_RANDOM = os.environ.get("FUZZ_RANDOM", "") not in ("", "0")


def fuzz_settings(scale: float = 1.0, **overrides) -> settings:
    """Hypothesis settings of a fuzz test: bounded, and derandomized (fixed seed) unless FUZZ_RANDOM is set."""
    options = dict(
        max_examples=max(1, int(FUZZ_EXAMPLES * scale)),
        derandomize=not FUZZ_RANDOM,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large,
                               HealthCheck.function_scoped_fixture],
    )
    options.update(overrides)
    return settings(**options)


@contextmanager
def requests_keep_the_connection():
    """Requests sent through the WSGI handler run inside the test's transaction, as with Django's test client:
    otherwise request_started/finished close the connection (CONN_MAX_AGE=0) in the middle of a test."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def load_api_schema():
    """The schema at /openapi/v1/schema/ as the app serves it; Schemathesis calls the app through WSGI, no socket.

    Loaded when the test module is imported: schemathesis.pytest.from_fixture (the lazy loader) does not work
    with pytest 9.2 (it sets the private Node._nodeid, which pytest no longer has)."""
    import schemathesis
    from django.core.handlers.wsgi import WSGIHandler

    with requests_keep_the_connection():
        schema = schemathesis.openapi.from_wsgi("/openapi/v1/schema/", WSGIHandler(),
                                                headers={"Accept": "application/json"})
    # The schema's worked examples are for the docs page, not for fuzzing: Schemathesis cannot combine them with
    # @schema.given, and they would change each operation's derived seed. The fuzzers see the shapes only.
    for operation in (op for item in schema.raw_schema["paths"].values() for op in item.values()):
        for media in [*operation.get("requestBody", {}).get("content", {}).values(),
                      *(m for r in operation.get("responses", {}).values() for m in r.get("content", {}).values())]:
            media.pop("examples", None)
    return schema


@pytest.fixture
def unthrottled(settings):
    """The fuzzers send far more than 100 requests/s to one merchant; 1106 would hide every other answer."""
    settings.RATE_LIMIT_PER_SECOND = 1_000_000
    settings.CALLBACK_RESEND_PER_MINUTE = 1_000_000


@pytest.fixture
def funded_merchant(merchant, unthrottled):
    """The conftest merchant (PHP and USD) with money available: payout creates can succeed, and a few of the
    larger ones (1,000,000 and up) exceed it, so 2003 is reachable too."""
    for currency in ("PHP", "USD"):
        balance_adjust(merchant_no=merchant.merchant_no, currency=currency, amount=1_000_000, reason="fuzz top-up")
    return merchant
