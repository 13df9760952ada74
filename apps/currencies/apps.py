from django.apps import AppConfig


class CurrenciesConfig(AppConfig):
    name = "apps.currencies"
    label = "currencies"

    def ready(self) -> None:
        from apps.currencies import staff_requests  # noqa: F401 - registers the currency change (four eyes)
