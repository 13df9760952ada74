from django.apps import AppConfig


class CommonConfig(AppConfig):
    name = "apps.common"
    label = "common"
    # The admin's section and breadcrumbs: audit log, staff requests, the settings trail, the operations overview.
    verbose_name = "Back office"

    def ready(self) -> None:
        from django.contrib import admin
        from django.db.backends.signals import connection_created

        from apps.common import audit_partitions  # noqa: F401 - registers the audit's monthly partitions
        from apps.common import limits  # noqa: F401 - registers its start-up check of the cache
        from apps.common.history import use_history_aware_cursor
        from apps.common.independence import (account_act_source_register, second_factor_trail_acts,
                                              staff_trail_acts)

        # Server-side binding, except inside pghistory contexts (docs/performance.md, "Prepared statements").
        connection_created.connect(use_history_aware_cursor, dispatch_uid="common.history_aware_cursor")
        # The independence rule reads who made, changed or granted roles to an account from the users' trail, and who
        # added or removed its second factor from the devices' trail.
        account_act_source_register(staff_trail_acts)
        account_act_source_register(second_factor_trail_acts)

        # The admin names the platform, not Django.
        admin.site.site_header = "Payments back office"
        admin.site.site_title = "Payments back office"
        admin.site.index_title = "Operations and risk"
        # No navigation sidebar: at 1280 px it took 300 px from every list; the breadcrumbs and the
        # index lead everywhere it did.
        admin.site.enable_nav_sidebar = False
