from django.apps import AppConfig


class MerchantPayoutsConfig(AppConfig):
    name = "apps.merchant_payouts"
    label = "merchant_payouts"
    verbose_name = "Merchant payouts by hand"
