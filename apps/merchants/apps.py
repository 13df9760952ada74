from django.apps import AppConfig


class MerchantsConfig(AppConfig):
    name = "apps.merchants"
    label = "merchants"

    def ready(self):
        from apps.merchants.api import schema  # noqa: F401 - registers the OpenAPI authentication extension
