from apps.common.management.json_command import JsonCommand
from apps.ledger.services import balance_adjust


class Command(JsonCommand):
    help = "Ops credit (or debit, negative) of a merchant's available balance, as a ledger posting with a reason."

    def add_arguments(self, parser):
        parser.add_argument("merchant_no")
        parser.add_argument("currency")
        parser.add_argument("amount", type=int, help="minor units; negative to debit")
        parser.add_argument("--reason", required=True)

    def run(self, **options):
        return balance_adjust(merchant_no=options["merchant_no"], currency=options["currency"].upper(),
                              amount=options["amount"], reason=options["reason"])
