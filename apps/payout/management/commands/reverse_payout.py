from apps.common.management.json_command import JsonCommand
from apps.payout.selectors import payout_query_data
from apps.payout.services import payout_reverse


class Command(JsonCommand):
    help = "Reverse a SUCCESS payout once (what the admin action does); prints the order as payout/query."

    def add_arguments(self, parser):
        parser.add_argument("platform_order_no")
        parser.add_argument("--amount", type=int, required=True, help="reversal amount, minor units (1 to amount)")
        parser.add_argument("--fee-refund", type=int, required=True, help="fee refunded, minor units (0 to fee)")
        parser.add_argument("--reason", default="", help="kept in the audit trail")

    def run(self, **options):
        payout = payout_reverse(platform_order_no=options["platform_order_no"], reversal_amount=options["amount"],
                                fee_refund=options["fee_refund"], actor=None, source="cli",
                                reason=options["reason"])
        return payout_query_data(payout)
