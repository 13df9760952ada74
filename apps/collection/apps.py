from django.apps import AppConfig


class CollectionConfig(AppConfig):
    name = "apps.collection"
    label = "collection"

    def ready(self) -> None:
        from apps.channels.registry import PayinHandlers, register_payin_handlers
        from apps.collection.models import CollectionOrder, Refund
        from apps.collection.refunds import refund_channel_result
        from apps.collection.services import collection_notify_paid
        from apps.collection.upstream import collection_upstream_apply, collection_upstream_reconcile
        from apps.common.audit_partitions import audit_open_objects_register

        # An open order or refund keeps its audit trail's months past their retention.
        audit_open_objects_register(CollectionOrder, lambda: CollectionOrder.objects.filter(
            status=CollectionOrder.Status.CREATED))
        audit_open_objects_register(Refund, lambda: Refund.objects.exclude(status__in=Refund.TERMINAL))
        # What an upstream reports about a pay-in (webhook, reconciliation, the sandbox's Pay button) enters here.
        register_payin_handlers(PayinHandlers(apply_state=collection_upstream_apply, paid=collection_notify_paid,
                                              reconcile=collection_upstream_reconcile,
                                              refund_result=refund_channel_result))
