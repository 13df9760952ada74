from django.apps import AppConfig


class CallbacksConfig(AppConfig):
    name = "apps.callbacks"
    label = "callbacks"

    def ready(self) -> None:
        from apps.callbacks import partitions  # noqa: F401 - registers the attempts' monthly partitions
