from django.apps import AppConfig


class PortalConfig(AppConfig):
    """The merchant's own back office (docs/portal.md): the people of a merchant, their roles and pages."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.portal"
    verbose_name = "Merchant portal"

    def ready(self):
        from apps.payout_batches.services import payout_approver_hold_register
        from apps.portal import staff_requests  # noqa: F401 - registers the access recovery (four eyes)
        from apps.portal.recovery import payout_approval_hold

        payout_approver_hold_register(payout_approval_hold)

        from apps.common.stranded import stranded_kinds_register
        from apps.portal.refunds import REFUND_REQUEST_STRANDED

        stranded_kinds_register(REFUND_REQUEST_STRANDED)
