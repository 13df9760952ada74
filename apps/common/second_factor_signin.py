"""Sign-in with a second factor: one mechanism for the staff's admin (apps.common.staff_signin, docs/staff-access.md)
and the merchant's portal (apps.portal.signin, docs/portal.md); what differs between them is a `SignInFlow`'s fields.

After the password (each side's own form, through django-axes), the session remembers who is half-way; the person
then enters a code of their authenticator app (TOTP, django-otp) or one of their recovery codes (django-otp's static
tokens, each good once). Whoever has no confirmed authenticator yet enrols on that first sign-in: a QR code and its
secret, confirmed by a code, then ten recovery codes shown once. The session is signed in only after the second
factor. A wrong code counts as a failed sign-in for django-axes, as a wrong password does, and the lockout page is
the flow's own.
"""

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import segno
from axes.handlers.proxy import AxesProxyHandler
from django import forms
from django.conf import settings
from django.contrib import auth, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_login_failed
from django.db import transaction
from django.http import HttpResponseRedirect
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import mark_safe
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.debug import sensitive_post_parameters
from django_otp import devices_for_user
from django_otp import login as otp_login
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

PENDING_SECONDS = 600  # the second factor must follow the password within this time
AUTHENTICATOR_NAME = "Authenticator app"
RECOVERY_NAME = "Recovery codes"

THROTTLED = "Too many wrong codes in a row: wait a few seconds, then enter the code your app shows then."
WRONG_CODE = ("That code is not right, or was already used. Enter the current code of your authenticator app, or an "
              "unused recovery code.")
WRONG_ENROL_CODE = "That code is not right: check the time on your phone, and enter the code the app shows now."


class CodeForm(forms.Form):
    code = forms.CharField(label="Code", max_length=32, strip=True,
                           widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "autofocus": True,
                                                         "inputmode": "text", "spellcheck": "false"}))

    def clean_code(self) -> str:
        return "".join(self.cleaned_data["code"].split()).lower()


def confirmed_authenticator(user) -> TOTPDevice | None:
    return TOTPDevice.objects.filter(user=user, confirmed=True).first()


def new_recovery_codes(user) -> list[str]:
    """Replaces the user's recovery codes with STAFF_RECOVERY_CODES new ones (each good once); returns them."""
    device, _ = StaticDevice.objects.get_or_create(user=user, name=RECOVERY_NAME, defaults={"confirmed": True})
    device.token_set.all().delete()
    codes = [StaticToken.random_token() for _ in range(settings.STAFF_RECOVERY_CODES)]
    StaticToken.objects.bulk_create([StaticToken(device=device, token=code) for code in codes])
    return codes


def _throttled(devices) -> bool:
    """A device refuses codes for a moment after a wrong one (django-otp: 1 s, then 2, 4, 8, ...)."""
    return any(not device.verify_is_allowed()[0] for device in devices)


def _devices_for(user, code: str) -> list:
    """The devices a code is for: six digits, the authenticator; anything else, the recovery codes. A recovery code
    never counts as a wrong authenticator code (which would throttle the authenticator)."""
    kind = TOTPDevice if code.isdigit() and len(code) == 6 else StaticDevice
    return [device for device in devices_for_user(user, confirmed=True) if isinstance(device, kind)]


@transaction.atomic
def _verify(devices: list, code: str) -> tuple[bool, object]:
    """(throttled, the device this code belongs to or None), each device's row locked from its throttle check to its
    verdict. django-otp reads the failure count, adds one in Python and saves the row: without the lock, concurrent
    wrong codes all passed the throttle on the same count and all saved count + 1 (30 at once counted 1), and two
    requests with the same right code could both be accepted."""
    locked = [type(device).objects.select_for_update().get(pk=device.pk)
              for device in sorted(devices, key=lambda device: (type(device).__name__, device.pk))]
    if _throttled(locked):
        return True, None
    for device in locked:
        if device.verify_token(code):
            return False, device
    return False, None


def _failed(request, user) -> None:
    """A wrong code: a failed sign-in for django-axes (its lockout then answers through the flow's page)."""
    user_login_failed.send(sender=__name__, credentials={"username": user.get_username()}, request=request)


def _locked(request, user) -> bool:
    return AxesProxyHandler.is_locked(request, credentials={"username": user.get_username()})


def _enrol_context(device, form, user) -> dict:
    secret = base64.b32encode(device.bin_key).decode()
    return {"title": "Set up your authenticator app", "form": form, "username": user.get_username(),
            "secret": " ".join(secret[i:i + 4] for i in range(0, len(secret), 4)),
            "qr_svg": mark_safe(segno.make(device.config_url, error="m").svg_inline(scale=5))}


def _as_is(response):
    return response


def _no_context(request) -> dict:
    return {}


@dataclass(frozen=True)
class SignInFlow:
    """One side's sign-in: where its pages are, who may use it, where it leads. Its `code_step` and `enrol_step` are
    the views of the second and the enrolment step; the password step is each side's own and ends in `begin`."""

    session_key: str  # the session key of the person half-way (after the password, before the second factor)
    password_url: str  # URL names of the three steps
    code_url: str
    enrol_url: str
    templates: str  # the folder of code.html, enrol.html, recovery_codes.html and locked_out.html
    home_url: str  # URL name of where a sign-in leads when `next` does not lead elsewhere
    may_sign_in: Callable  # (user) -> bool: who may sign in here, checked again at every step
    next_prefix: str = ""  # a `next` outside this path is ignored ("" any path of this host)
    context: Callable = field(default=_no_context)  # (request) -> the context every page of the side needs
    finish: Callable = field(default=_as_is)  # (response) -> response: what every answer gets (headers)

    # --- the steps' common parts -------------------------------------------------------------------------------

    def signed_in(self, request) -> bool:
        """Whether the request is already a signed-in person of this side, with the second factor verified."""
        user = request.user
        return user.is_authenticated and user.is_verified() and self.may_sign_in(user)

    def begin(self, request, user, next_url: str = ""):
        """The password was right: the session (a new key) remembers who is half-way; on to the code, or to the
        enrolment of a first authenticator."""
        request.session.cycle_key()
        request.session[self.session_key] = {"user": user.pk, "backend": user.backend, "at": time.time(),
                                             "next": next_url}
        return self.finish(redirect(self.code_url if confirmed_authenticator(user) else self.enrol_url))

    def next_url(self, request, url: str = "") -> str:
        if url and url.startswith(self.next_prefix) and url_has_allowed_host_and_scheme(
                url, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
            return url
        return reverse(self.home_url)

    def page(self, request, template: str, context: dict, status: int = 200):
        return self.finish(TemplateResponse(request, f"{self.templates}{template}",
                                            {**self.context(request), **context}, status=status))

    def locked_out(self, request):
        """The lockout page when the failure just recorded (django-axes) locked this username and address, else
        None. The flow answers it itself (django-axes's middleware would answer with its one template)."""
        if getattr(request, "axes_locked_out", False):
            request.axes_locked_out = False
            return self.page(request, "locked_out.html", {"title": "Locked out"},
                             status=settings.AXES_HTTP_RESPONSE_CODE)
        return None

    def _pending_user(self, request):
        pending = request.session.get(self.session_key)
        if not pending or time.time() - pending.get("at", 0) > PENDING_SECONDS:
            return None
        user = get_user_model().objects.filter(pk=pending["user"], is_active=True).first()
        if user is None or not self.may_sign_in(user):
            return None
        user.backend = pending["backend"]
        return user

    def _sign_in(self, request, user, device) -> dict:
        pending = request.session.pop(self.session_key)
        auth.login(request, user, backend=pending["backend"])
        otp_login(request, device)
        return pending

    def _wrong_code(self, request, user, form, template: str, context: dict, message: str):
        _failed(request, user)
        if locked := self.locked_out(request):
            return locked
        form.add_error("code", message)
        return self.page(request, template, context)

    def _enrolling_device(self, request, user) -> TOTPDevice:
        """The unconfirmed authenticator of this sign-in, made when its enrolment page is first shown. Each sign-in
        gets a secret of its own and any earlier unconfirmed one is deleted: whoever saw the enrolment page of another
        sign-in (someone who had the password before its owner enrolled) cannot know the secret its owner goes on to
        confirm."""
        pending = request.session[self.session_key]
        device = TOTPDevice.objects.filter(pk=pending.get("enrol_device") or 0, user=user, confirmed=False).first()
        if device is None:
            TOTPDevice.objects.filter(user=user, confirmed=False).delete()
            device = TOTPDevice.objects.create(user=user, name=AUTHENTICATOR_NAME, confirmed=False)
            request.session[self.session_key] = {**pending, "enrol_device": device.pk}
        return device

    # --- the views -----------------------------------------------------------------------------------------------

    def code_view(self, request):
        """Step 2: a code of the authenticator app, or one recovery code (then it is used up)."""
        user = self._pending_user(request)
        if user is None:
            return self.finish(redirect(self.password_url))
        if confirmed_authenticator(user) is None:
            return self.finish(redirect(self.enrol_url))
        form = CodeForm(request.POST or None)
        context = {"title": "Second factor", "form": form, "username": user.get_username()}
        if request.method == "POST" and form.is_valid():
            code = form.cleaned_data["code"]
            if _locked(request, user):
                return self._wrong_code(request, user, form, "code.html", context, WRONG_CODE)
            throttled, device = _verify(_devices_for(user, code), code)
            if throttled:
                form.add_error("code", THROTTLED)
                return self.page(request, "code.html", context, status=429)
            if device is None:
                return self._wrong_code(request, user, form, "code.html", context, WRONG_CODE)
            pending = self._sign_in(request, user, device)
            if isinstance(device, StaticDevice):
                messages.warning(request, f"You signed in with a recovery code; it is used up. "
                                          f"{device.token_set.count()} left.")
            return self.finish(HttpResponseRedirect(self.next_url(request, pending.get("next", ""))))
        return self.page(request, "code.html", context)

    def enrol_view(self, request):
        """First sign-in: add the authenticator app (QR code, or its secret typed in), confirm it with a code; then
        the recovery codes, shown once. A person who has an authenticator never sees this page (a stolen password
        enrols no second phone)."""
        user = self._pending_user(request)
        if user is None:
            return self.finish(redirect(self.password_url))
        if confirmed_authenticator(user) is not None:
            return self.finish(redirect(self.code_url))
        device = self._enrolling_device(request, user)
        form = CodeForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            if _locked(request, user):
                return self._wrong_code(request, user, form, "enrol.html", _enrol_context(device, form, user),
                                        WRONG_CODE)
            with transaction.atomic():
                throttled, confirmed = _verify([device], form.cleaned_data["code"])
                if throttled:
                    form.add_error("code", THROTTLED)
                    return self.page(request, "enrol.html", _enrol_context(device, form, user), status=429)
                if confirmed is not None:
                    confirmed.confirmed = True
                    confirmed.save(update_fields=["confirmed"])
                    codes = new_recovery_codes(user)
                    pending = self._sign_in(request, user, confirmed)
                    return self.page(request, "recovery_codes.html", {
                        "title": "Your recovery codes", "codes": codes,
                        "next_url": self.next_url(request, pending.get("next", ""))})
            return self._wrong_code(request, user, form, "enrol.html", _enrol_context(device, form, user),
                                    WRONG_ENROL_CODE)
        return self.page(request, "enrol.html", _enrol_context(device, form, user))

    def views(self) -> tuple[Callable, Callable]:
        """(code step, enrolment step) as Django views."""
        guard = lambda view: sensitive_post_parameters()(csrf_protect(never_cache(view)))  # noqa: E731
        return guard(self.code_view), guard(self.enrol_view)
