from django.apps import AppConfig


class CurrenciesConfig(AppConfig):
    name = "apps.currencies"
    label = "currencies"
