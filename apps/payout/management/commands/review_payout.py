from apps.common.management.json_command import JsonCommand
from apps.payout.models import Payout
from apps.payout.selectors import payout_query_data
from apps.payout.services import PayoutNotFound, payout_approve, payout_reject


class Command(JsonCommand):
    help = "Approve or reject a FROZEN payout (what the admin review queue does); prints the order as payout/query."

    def add_arguments(self, parser):
        parser.add_argument("platform_order_no")
        decision = parser.add_mutually_exclusive_group(required=True)
        decision.add_argument("--approve", action="store_true")
        decision.add_argument("--reject", action="store_true")
        parser.add_argument("--reason", default="", help="required with --reject; sent to the merchant as fail_reason")

    def run(self, **options):
        payout = Payout.objects.filter(platform_order_no=options["platform_order_no"]).first()
        if payout is None:
            raise PayoutNotFound(f"no payout {options['platform_order_no']}")
        # docs/api.md, "Operations CLI": a decision on an order that is not FROZEN exits non-zero; checked under the
        # row lock, so a reviewer deciding at the same moment makes this exit non-zero too (replay=False).
        service = payout_approve if options["approve"] else payout_reject
        payout = service(payout_id=payout.pk, reviewer=None, reason=options["reason"], via="cli", replay=False)
        return payout_query_data(payout)
