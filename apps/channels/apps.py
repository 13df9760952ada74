import importlib
import importlib.util

from django.apps import AppConfig

# Adapter modules register themselves with apps.channels.registry on import.
ADAPTER_MODULES = ("apps.channels.sandbox_payin", "apps.channels.sandbox_payout", "apps.channels.xendit",
                  "apps.channels.paymongo")


class ChannelsConfig(AppConfig):
    name = "apps.channels"
    label = "channels"

    def ready(self) -> None:
        from apps.channels import staff_requests  # noqa: F401 - registers channel and bank code changes (four eyes)

        for module in ADAPTER_MODULES:
            if importlib.util.find_spec(module) is not None:  # the payout adapter ships in its own issue
                importlib.import_module(module)
