from django.apps import AppConfig


class MerchantsConfig(AppConfig):
    name = "apps.merchants"
    label = "merchants"

    def ready(self):
        from apps.merchants import staff_requests  # noqa: F401 - registers the key upload (four eyes)
        from apps.merchants.api import schema  # noqa: F401 - registers the OpenAPI authentication extension
