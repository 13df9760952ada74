"""Run only by tests/config/test_parallel_suite.py, in a pytest of its own (the name is not test_*.py): a test that
passes but logs a secret, which the session's log check must turn into a failed run, under xdist too."""

import logging
import os

import pytest
from django.conf import settings


@pytest.mark.skipif(os.environ.get("LOG_LEAK_PROBE") != "1", reason="run by tests/config/test_parallel_suite.py")
def test_passes_but_logs_the_secret_key():
    logging.getLogger("apps.probe").error("settings carry %s", settings.SECRET_KEY)
