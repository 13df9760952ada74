from tests.callbacks.conftest import Clock, clock  # noqa: F401 - the health check reports the callback sweeper's clock
