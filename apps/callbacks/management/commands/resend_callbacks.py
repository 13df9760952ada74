from datetime import UTC, datetime

from django.core.management.base import CommandError

from apps.callbacks.models import CallbackEvent
from apps.callbacks.resend import callback_resend
from apps.callbacks.selectors import callback_events_to_resend
from apps.common.management.json_command import JsonCommand
from apps.merchants.models import Merchant


def _moment(value: str, option: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(f"{option} must be an ISO 8601 date-time, e.g. 2026-11-25T08:00:00+08:00; got {value!r}")
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)  # a naive time is UTC


def _event(event: CallbackEvent, status: str) -> dict:
    return {"event_id": event.pk, "merchant_no": event.merchant.merchant_no, "type": event.type,
            "platform_order_no": event.platform_order_no, "status": status}


class Command(JsonCommand):
    help = ("Re-send dead (or delivered) callback events: one extra attempt each, with a fresh signature, audited "
            "(what the admin's Re-send action does). Selects by merchant, status, type and creation time.")

    def add_arguments(self, parser):
        parser.add_argument("--merchant", metavar="MERCHANT_NO", help="only this merchant's events")
        parser.add_argument("--status", choices=["dead", "delivered"], default="dead", help="default: dead")
        parser.add_argument("--type", choices=CallbackEvent.Type.values)
        parser.add_argument("--since", help="created at or after this ISO date-time (naive means UTC)")
        parser.add_argument("--until", help="created at or before this ISO date-time (naive means UTC)")
        parser.add_argument("--dry-run", action="store_true", help="print what would be re-sent, change nothing")

    def run(self, **options):
        operator = self.operator  # --operator, else the OS user (JsonCommand)
        merchant_id = None
        if options["merchant"] is not None:
            merchant_id = Merchant.objects.filter(merchant_no=options["merchant"]).values_list("pk", flat=True).first()
            if merchant_id is None:
                raise CommandError(f"no merchant {options['merchant']}")
        since = _moment(options["since"], "--since") if options["since"] is not None else None
        until = _moment(options["until"], "--until") if options["until"] is not None else None
        if since and until and since > until:
            raise CommandError("--since must not be after --until.")
        selected = callback_events_to_resend(status=options["status"], merchant_id=merchant_id, type=options["type"],
                                             created_from=since, created_until=until)
        result = {"dry_run": options["dry_run"], "operator": operator, "status": options["status"],
                  "selected": len(selected)}
        if options["dry_run"]:
            return {**result, "resent": 0, "events": [_event(e, e.status) for e in selected], "skipped": []}
        # Checked again under the row lock: an event that changed state since the selection is skipped.
        resent = callback_resend(event_ids=[e.pk for e in selected], actor=None, actor_label=f"cli:{operator}",
                                 statuses=(options["status"],))
        resent_ids = {e.pk for e in resent}
        return {**result, "resent": len(resent),
                "events": [_event(e, "pending") for e in selected if e.pk in resent_ids],
                "skipped": [e.pk for e in selected if e.pk not in resent_ids]}
