"""The limits that guard money or abuse hold under concurrency on every cache the platform runs with
(apps.common.limits, docs/back-office.md "Limits under concurrency"): requests fired at the same moment from real
threads, each on its own database connection, and exactly the limit passes on Redis, the platform's one cache."""

from unittest import mock

import pytest
import time_machine
from django.core import checks
from django.core.cache import cache

from apps.callbacks.resend import merchant_resend_allowed
from apps.common.limits import check_limit_cache
from apps.merchants.api.authentication import request_admit
from apps.portal import developers
from tests.helpers import at_once

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 15


@pytest.fixture
def backend():
    """The test settings' Redis, emptied before and after."""
    cache.clear()
    yield
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


def test_one_nonce_sent_fifteen_times_at_once_is_admitted_once(backend, settings):
    settings.RATE_LIMIT_PER_SECOND = 100
    with time_machine.travel("2030-01-01 12:00:00.100 +0000", tick=False):
        outcomes = at_once(lambda _: request_admit(merchant_id=4245, nonce="the-same-nonce") is None, THREADS)
    assert passed(outcomes) == 1


@pytest.mark.parametrize("backend_path", ["django.core.cache.backends.locmem.LocMemCache",
                                          "django.core.cache.backends.db.DatabaseCache"])
def test_a_cache_that_is_not_redis_is_refused_at_start_up(settings, backend_path):
    redis = settings.CACHES
    assert check_limit_cache() == []  # the test settings' Redis
    settings.CACHES = {"default": {"BACKEND": backend_path, "LOCATION": "anywhere"}}
    [error] = check_limit_cache()
    assert isinstance(error, checks.Error) and error.id == "common.E001"
    assert backend_path in error.msg and "must be Redis" in error.msg and "REDIS_URL" in error.hint
    settings.CACHES = redis


@pytest.mark.parametrize("page", ["/admin/login/", "/portal/signin/"])
def test_fifteen_wrong_passwords_at_once_are_tried_no_more_than_the_lockout_allows(bootstrapped, merchant, settings,
                                                                                    page):
    """django-axes checks the lockout before the password and records the failure after it: fifteen guesses sent
    together all passed the check on the same count of failures, and all fifteen passwords were tried."""
    import threading

    from django.contrib.auth.base_user import AbstractBaseUser
    from django.test import Client

    from tests.portal.support import portal_user
    from tests.support.four_eyes import staff_account
    from tests.support.staff import PASSWORD

    settings.AXES_FAILURE_LIMIT = 5
    username = staff_account("ada").username if page == "/admin/login/" else portal_user(merchant, "owner").username
    tried, lock, check_password = [], threading.Lock(), AbstractBaseUser.check_password

    def counted_check(user, raw_password):  # the real check, counted: how many guesses were tried
        with lock:
            tried.append(raw_password)
        return check_password(user, raw_password)

    def guess(index: int) -> int:
        return Client(REMOTE_ADDR="203.0.113.7").post(page, {"username": username,
                                                             "password": f"guess-{index}"}).status_code

    with mock.patch.object(AbstractBaseUser, "check_password", counted_check):
        statuses = [status for status, exc in at_once(guess, THREADS) if exc is None]
        assert len(statuses) == THREADS
        assert len(tried) == 5
        # The right password now: refused without being tried, as every guess after the fifth was.
        response = Client(REMOTE_ADDR="203.0.113.7").post(page, {"username": username, "password": PASSWORD})
        assert response.status_code in (403, 429) and len(tried) == 5
