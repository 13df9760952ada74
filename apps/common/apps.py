from django.apps import AppConfig


class CommonConfig(AppConfig):
    name = "apps.common"
    label = "common"

    def ready(self) -> None:
        from django.contrib import admin

        # The admin names the platform, not Django (issue 17).
        admin.site.site_header = "Payments back office"
        admin.site.site_title = "Payments back office"
        admin.site.index_title = "Operations and risk"
