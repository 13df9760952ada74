from django.apps import AppConfig


class LedgerConfig(AppConfig):
    name = "apps.ledger"
    label = "ledger"

    def ready(self) -> None:
        from apps.ledger import staff_requests  # noqa: F401 - registers the balance adjustment (four eyes)
