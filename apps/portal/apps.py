from django.apps import AppConfig


class PortalConfig(AppConfig):
    """The merchant's own back office (docs/portal.md): the people of a merchant, their roles and pages."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.portal"
    verbose_name = "Merchant portal"
