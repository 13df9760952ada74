from apps.common.models import Heartbeat


class OperationsOverview(Heartbeat):
    """The admin's operations overview page (its reads: apps.operations.selectors); a proxy over the periodic jobs'
    heartbeats so that the page has an admin entry and a view permission of its own."""

    class Meta:
        proxy = True
        verbose_name = "operations overview"
        verbose_name_plural = "Operations overview"
