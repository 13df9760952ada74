from django.apps import AppConfig


class CallbacksConfig(AppConfig):
    name = "apps.callbacks"
    label = "callbacks"
