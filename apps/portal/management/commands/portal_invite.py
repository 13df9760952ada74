"""Staff invite a person of a merchant to the portal: prints the one-time link (docs/portal.md, "Invites")."""

from django.conf import settings
from django.core.management.base import CommandError

from apps.common.management.json_command import JsonCommand
from apps.merchants.models import Merchant
from apps.portal.models import Role
from apps.portal.services import InviteError, invite_create, invite_hours


class Command(JsonCommand):
    help = "Make a one-time portal invite link for a person of a merchant (printed; no e-mail is sent)."
    expected_errors = (*JsonCommand.expected_errors, InviteError)

    def add_arguments(self, parser):
        parser.add_argument("merchant_no")
        parser.add_argument("--username", required=True, help="the person's sign-in name (their e-mail)")
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--base-url", default=settings.API_ROOT,
                            help="where the portal is served, e.g. https://pay.example.com (default: API_ROOT, "
                                 "as create_staff's admin_url)")

    def run(self, *, merchant_no, username, role, base_url, **options) -> dict:
        merchant = Merchant.objects.filter(merchant_no=merchant_no).first()
        if merchant is None:
            raise CommandError(f"no merchant {merchant_no}")
        created = invite_create(merchant=merchant, username=username, role=role, actor_label="cli")
        return {"merchant_no": merchant.merchant_no, "username": created.invite.username, "role": role,
                "invite_url": f"{base_url.rstrip('/')}{created.path()}",
                "expires_at": created.invite.expires_at.isoformat(), "valid_hours": invite_hours()}
