"""One call for a burst of requests in this process: the first request starts a timer, the ones before it fires
ride on it.

The guarantee: every `request()` is followed by a call of `fn` that *starts after it*. A request that finds a
timer pending is covered by that timer (it has not started `fn` yet); one that comes while `fn` runs starts a new
timer. A process that exits normally (a graceful shutdown: gunicorn's SIGTERM, the end of a command) makes the
pending call before it exits; one that is killed before its timer fires loses that call: use it only where a
sweeper catches up.
"""

import atexit
import logging
import threading
from collections.abc import Callable

from django.db import connections

logger = logging.getLogger(__name__)


class Coalesced:
    def __init__(self, fn: Callable[[], None], *, delay: Callable[[], float]) -> None:
        self._fn = fn
        self._delay = delay  # read at each request, so settings overridden in tests apply
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        atexit.register(self._fire_pending)  # the timer thread is a daemon: it would die with the process

    def request(self) -> None:
        delay = self._delay()
        if delay <= 0:
            self._fn()
            return
        with self._lock:
            if self._timer is not None:
                return
            self._timer = threading.Timer(delay, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire_pending(self) -> None:
        """At exit: make the call a pending timer would have made (none if its call has started already)."""
        with self._lock:
            timer = self._timer
            if timer is None:
                return
            timer.cancel()
        self._fire()

    def _fire(self) -> None:
        with self._lock:
            self._timer = None  # from here on a request starts a new timer: this call may not cover it
        try:
            self._fn()
        except Exception:  # noqa: BLE001 - a timer thread has no caller to raise to
            logger.exception("coalesced call %s failed", getattr(self._fn, "__qualname__", self._fn))
        finally:
            connections.close_all()  # this thread's own (a database cache opens one); the thread ends here
