from django.apps import AppConfig


class MerchantsConfig(AppConfig):
    name = "apps.merchants"
    label = "merchants"
