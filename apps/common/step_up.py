"""The second factor asked again at the moment of a sensitive change (a merchant key, callback URLs, a payout batch's
approval in the merchant portal; docs/portal.md, "Second factor asked again").

Only a code of the person's confirmed authenticator app (TOTP) counts, never a recovery code: a recovery code is
for getting in when the phone is lost, not for approving money. django-otp accepts each time step once (the device
keeps `last_t`), so the code that signed the person in, or confirmed their previous change, is refused: each change
needs the code the app shows at that moment. The device's row is locked from its throttle check to its verdict
(apps.common.second_factor_signin._verify): concurrent wrong codes are each counted, and one right code sent twice at
once is accepted once.
"""

from django.db import transaction
from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.common.second_factor_signin import THROTTLED, _verify


class SecondFactorRefused(PermissionError):
    """The code was missing, wrong, already used, or the device is throttled; nothing changed. The message says
    which, in words for the person."""


def second_factor_confirm(*, user, code: str) -> TOTPDevice:
    """The user's authenticator accepted `code` now (used up), or SecondFactorRefused. Runs its own short transaction
    before the change's durable one, so a refused code is counted even though the change does not happen."""
    code = "".join((code or "").split())
    if not (code.isdigit() and len(code) == 6):
        raise SecondFactorRefused("Enter the 6-digit code your authenticator app shows now.")
    devices = list(TOTPDevice.objects.filter(user=user, confirmed=True))
    if not devices:
        raise SecondFactorRefused("You have no authenticator app set up; sign in again to set one up.")
    with transaction.atomic():
        throttled, device = _verify(devices, code)
    if throttled:
        raise SecondFactorRefused(THROTTLED)
    if device is None:
        raise SecondFactorRefused("That code is not right, or was already used (each code works once): enter the "
                                  "code your authenticator app shows now.")
    return device
