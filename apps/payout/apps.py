from django.apps import AppConfig


class PayoutConfig(AppConfig):
    name = "apps.payout"
    label = "payout"
