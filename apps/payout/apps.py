from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _groups_ensure(sender, **kwargs) -> None:
    # After every migrate and every test-database flush (which empties auth tables), the groups come back.
    from django.apps import apps as global_apps

    from apps.payout.permissions import payout_groups_ensure

    apps = kwargs.get("apps") or global_apps
    if "payout" not in apps.app_configs:  # migrated back to zero: nothing to give permissions on
        return
    payout_groups_ensure(apps)


class PayoutConfig(AppConfig):
    name = "apps.payout"
    label = "payout"
    verbose_name = "Payouts"

    def ready(self) -> None:
        from apps.channels.registry import PayoutHandlers, register_payout_handlers
        from apps.common.audit_partitions import audit_open_objects_register
        from apps.payout import staff_requests  # noqa: F401 - registers the payout reversal (four eyes)
        from apps.payout.models import Payout
        from apps.payout.services import payout_channel_result, payout_channel_returned
        from apps.payout.upstream import payout_upstream_apply, payout_upstream_reconcile

        # A payout in flight keeps its audit trail's months past their retention.
        audit_open_objects_register(Payout, lambda: Payout.objects.exclude(status__in=Payout.TERMINAL))
        post_migrate.connect(_groups_ensure, sender=self, dispatch_uid="payout_groups_ensure")
        # What an upstream reports about a disbursement (webhook, reconciliation, the sandbox bank) enters here.
        register_payout_handlers(PayoutHandlers(apply_state=payout_upstream_apply, result=payout_channel_result,
                                                returned=payout_channel_returned, reconcile=payout_upstream_reconcile))
