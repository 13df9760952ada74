"""The limits that guard money or abuse hold under concurrency on every cache the platform runs with
(apps.common.limits, docs/back-office.md "Limits under concurrency"): requests fired at the same moment from real
threads, each on its own database connection, and exactly the limit passes, on Redis and on the database cache
(`make run` without REDIS_URL)."""

import pytest
import time_machine
from django.core import checks
from django.core.cache import cache
from django.core.management import call_command

from apps.callbacks.resend import merchant_resend_allowed
from apps.common.limits import check_limit_cache
from apps.merchants.api.authentication import request_admit
from apps.portal import developers
from tests.helpers import at_once

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 15
DATABASE_CACHE = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "cache_table"}}


@pytest.fixture(params=["redis", "database"])
def backend(request, settings):
    """Each cache the settings allow: the test settings' Redis, and the database cache of `make run`."""
    if request.param == "database":
        settings.CACHES = DATABASE_CACHE
        call_command("createcachetable", verbosity=0)
    cache.clear()
    yield request.param
    cache.clear()


def passed(outcomes) -> int:
    assert [exc for _, exc in outcomes if exc is not None] == []
    return sum(1 for allowed, _ in outcomes if allowed)


def test_fifteen_callback_resends_at_once_pass_exactly_the_limit_of_ten(backend, settings):
    settings.CALLBACK_RESEND_PER_MINUTE = 10
    with time_machine.travel("2030-01-01 12:00:10 +0000", tick=False):  # one minute's window
        assert passed(at_once(lambda _: merchant_resend_allowed(merchant_id=4242), THREADS)) == 10


def test_fifteen_test_callbacks_at_once_pass_exactly_the_portal_limit(backend, settings):
    settings.PORTAL_TEST_CALLBACKS_PER_MINUTE = 3
    with time_machine.travel("2030-01-01 12:00:10 +0000", tick=False):
        assert passed(at_once(lambda _: developers.test_callback_allowed(merchant_id=4243), THREADS)) == 3


def test_fifteen_signed_requests_at_once_pass_exactly_the_rate_limit(backend, settings):
    settings.RATE_LIMIT_PER_SECOND = 5
    with time_machine.travel("2030-01-01 12:00:00.100 +0000", tick=False):  # all fifteen in one second's window
        outcomes = at_once(lambda index: request_admit(merchant_id=4244, nonce=f"nonce-{index}") is None, THREADS)
    assert passed(outcomes) == 5


def test_a_cache_that_cannot_count_exactly_is_refused_at_start_up(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    [error] = check_limit_cache()
    assert isinstance(error, checks.Error) and "LocMemCache" in error.msg
    settings.CACHES = DATABASE_CACHE
    assert check_limit_cache() == []
