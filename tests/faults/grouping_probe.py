"""Run only by tests/config/test_parallel_suite.py, in a pytest of its own (the name is not test_*.py): four
trivial tests under tests/faults/, which `--dist loadgroup` must send to one worker, as it sends the drills
(tests/conftest.py: pytest_collection_modifyitems)."""

import os

import pytest


@pytest.mark.parametrize("n", range(4))
def test_grouped_with_the_drills(n):
    assert os.environ.get("PYTEST_XDIST_WORKER", "").startswith("gw")
