from django.apps import AppConfig


class OperationsConfig(AppConfig):
    """The layer above the domains: pages that read several of them at once (the operations overview). No app
    imports this one; its one model is the overview page's proxy (docs/back-office.md, "Operations overview")."""

    name = "apps.operations"
    label = "operations"
    verbose_name = "Operations"
