"""The suite's one way to wait for something another thread or process does: poll a predicate until it holds.

Tests wait on the event they depend on (a row's state, a received callback, a log line), with a generous
timeout for a loaded 2-core machine, never on a fixed sleep followed by an assertion."""

import time


def wait_until(predicate, *, timeout: float = 20.0, interval: float = 0.05, what: str = "condition"):
    """Call `predicate` until it returns something truthy, and return that; AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
