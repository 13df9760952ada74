"""Staff sign-in with a second factor (docs/staff-access.md).

The admin's /admin/login/ is replaced by two steps: the password (Django's admin form, through django-axes), then a
code from the staff member's authenticator app (TOTP, django-otp) or one of their recovery codes (django-otp's static
tokens, each good once). Whoever has no confirmed authenticator yet enrols on that first sign-in: a QR code and its
secret, confirmed by a code, then ten recovery codes shown once. The session is signed in only after the second
factor, and the admin refuses any session that was not (AdminRequiresSecondFactor). A wrong code counts as a failed
sign-in for django-axes, as a wrong password does.
"""

import base64
import time

import segno
from axes.handlers.proxy import AxesProxyHandler
from django import forms
from django.conf import settings
from django.contrib import admin, auth, messages
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.signals import user_login_failed
from django.contrib.auth.views import LoginView
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

from apps.common.history import admin_prefix

PENDING = "staff_signin_pending"  # session key: the user who gave the right password, awaiting the second factor
PENDING_SECONDS = 600  # the second factor must follow the password within this time
AUTHENTICATOR_NAME = "Authenticator app"
RECOVERY_NAME = "Recovery codes"


class AdminRequiresSecondFactor:
    """In the admin, a signed-in user whose session has no verified second factor is nobody: the admin answers as
    to an anonymous visitor (the sign-in page). Sessions made by our sign-in are always verified; this closes any
    other way in (an old session, a password-only login())."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path_info.startswith(admin_prefix()):
            user = request.user
            if user.is_authenticated and not user.is_verified():
                request.user = AnonymousUser()
        return self.get_response(request)


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


def _pending_user(request):
    pending = request.session.get(PENDING)
    if not pending or time.time() - pending.get("at", 0) > PENDING_SECONDS:
        return None
    user = get_user_model().objects.filter(pk=pending["user"], is_active=True, is_staff=True).first()
    if user is not None:
        user.backend = pending["backend"]
    return user


def _next_url(request, pending: dict | None = None) -> str:
    url = (pending or {}).get("next") or ""
    if url and url_has_allowed_host_and_scheme(url, allowed_hosts={request.get_host()},
                                                require_https=request.is_secure()):
        return url
    return reverse("admin:index")


def _failed(request, user) -> None:
    """A wrong code: a failed sign-in for django-axes (its lockout then answers through its middleware)."""
    user_login_failed.send(sender=__name__, credentials={"username": user.get_username()}, request=request)


def _locked(request, user) -> bool:
    return AxesProxyHandler.is_locked(request, credentials={"username": user.get_username()})


def _sign_in(request, user, device) -> dict:
    pending = request.session.pop(PENDING)
    auth.login(request, user, backend=pending["backend"])
    otp_login(request, device)
    return pending


def _render(request, template: str, context: dict, status: int = 200):
    return TemplateResponse(request, template, {**admin.site.each_context(request), **context}, status=status)


class PasswordStep(LoginView):
    """Step 1: Django's admin login form (staff only; django-axes counts the failures). Nobody is signed in yet."""

    authentication_form = AdminAuthenticationForm
    template_name = "admin/login.html"
    redirect_authenticated_user = False

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context.update(admin.site.each_context(self.request), title="Log in", subtitle=None,
                       app_path=self.request.get_full_path(), username="")
        context.setdefault("next", "")
        return context

    def dispatch(self, request, *args, **kwargs):
        if request.user.is_authenticated and request.user.is_staff and request.user.is_verified():
            return HttpResponseRedirect(_next_url(request, {"next": request.GET.get("next", "")}))
        return super().dispatch(request, *args, **kwargs)

    def form_valid(self, form):
        user = form.get_user()
        self.request.session.cycle_key()
        self.request.session[PENDING] = {"user": user.pk, "backend": user.backend, "at": time.time(),
                                         "next": self.get_redirect_url()}
        step = "staff-signin-code" if confirmed_authenticator(user) else "staff-signin-enrol"
        return redirect(step)


@sensitive_post_parameters()
@csrf_protect
@never_cache
def code_step(request):
    """Step 2: a code of the authenticator app, or one recovery code (then it is used up)."""
    user = _pending_user(request)
    if user is None:
        return redirect("staff-signin")
    if confirmed_authenticator(user) is None:
        return redirect("staff-signin-enrol")
    form = CodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        if _locked(request, user):
            return _failed_response(request, user, form)
        throttled, device = _verify(_devices_for(user, form.cleaned_data["code"]), form.cleaned_data["code"])
        if throttled:
            form.add_error("code", THROTTLED)
            return _render(request, "admin/signin/code.html", {"title": "Second factor", "form": form,
                                                                "username": user.get_username()}, status=429)
        if device is not None:
            pending = _sign_in(request, user, device)
            if isinstance(device, StaticDevice):
                left = device.token_set.count()
                messages.warning(request, f"You signed in with a recovery code; it is used up. {left} left.")
            return HttpResponseRedirect(_next_url(request, pending))
        return _failed_response(request, user, form)
    return _render(request, "admin/signin/code.html", {"title": "Second factor", "form": form,
                                                        "username": user.get_username()})


def _locked_out(request):
    """The lockout page when the failure just recorded (django-axes) locked this username and address, else None."""
    if getattr(request, "axes_locked_out", False):
        return _render(request, settings.AXES_LOCKOUT_TEMPLATE, {"title": "Locked out"},
                       status=settings.AXES_HTTP_RESPONSE_CODE)
    return None


def _failed_response(request, user, form):
    _failed(request, user)
    if locked := _locked_out(request):
        return locked
    form.add_error("code", "That code is not right, or was already used. Enter the current code of your "
                           "authenticator app, or an unused recovery code.")
    return _render(request, "admin/signin/code.html", {"title": "Second factor", "form": form,
                                                        "username": user.get_username()})


def _throttled(devices) -> bool:
    """A device refuses codes for a moment after a wrong one (django-otp: 1 s, then 2, 4, 8, ...)."""
    return any(not device.verify_is_allowed()[0] for device in devices)


THROTTLED = "Too many wrong codes in a row: wait a few seconds, then enter the code your app shows then."


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


@sensitive_post_parameters()
@csrf_protect
@never_cache
def enrol_step(request):
    """First sign-in: add the authenticator app (QR code, or its secret typed in), confirm it with a code; then the
    recovery codes, shown once."""
    user = _pending_user(request)
    if user is None:
        return redirect("staff-signin")
    if confirmed_authenticator(user) is not None:
        return redirect("staff-signin-code")
    device = _enrolling_device(request, user)
    form = CodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        if _locked(request, user):
            return _failed_response(request, user, form)
        with transaction.atomic():
            throttled, confirmed = _verify([device], form.cleaned_data["code"])
            if throttled:
                form.add_error("code", THROTTLED)
                return _render(request, "admin/signin/enrol.html", _enrol_context(device, form, user), status=429)
            if confirmed is not None:
                confirmed.confirmed = True
                confirmed.save(update_fields=["confirmed"])
                codes = new_recovery_codes(user)
                pending = _sign_in(request, user, confirmed)
                return _render(request, "admin/signin/recovery_codes.html", {
                    "title": "Your recovery codes", "codes": codes, "next_url": _next_url(request, pending)})
        _failed(request, user)
        if locked := _locked_out(request):
            return locked
        form.add_error("code", "That code is not right: check the time on your phone, and enter the code the app "
                               "shows now.")
    return _render(request, "admin/signin/enrol.html", _enrol_context(device, form, user))


def _enrolling_device(request, user) -> TOTPDevice:
    """The unconfirmed authenticator of this sign-in, made when its enrolment page is first shown. Each sign-in gets a
    secret of its own and any earlier unconfirmed one is deleted: whoever saw the enrolment page of another sign-in
    (someone who had the password before its owner enrolled) cannot know the secret its owner goes on to confirm."""
    pending = request.session[PENDING]
    device = TOTPDevice.objects.filter(pk=pending.get("enrol_device") or 0, user=user, confirmed=False).first()
    if device is None:
        TOTPDevice.objects.filter(user=user, confirmed=False).delete()
        device = TOTPDevice.objects.create(user=user, name=AUTHENTICATOR_NAME, confirmed=False)
        request.session[PENDING] = {**pending, "enrol_device": device.pk}
    return device


def _enrol_context(device, form, user) -> dict:
    secret = base64.b32encode(device.bin_key).decode()
    return {"title": "Set up your authenticator app", "form": form, "username": user.get_username(),
            "secret": " ".join(secret[i:i + 4] for i in range(0, len(secret), 4)),
            "qr_svg": mark_safe(segno.make(device.config_url, error="m").svg_inline(scale=5))}


password_step = PasswordStep.as_view()
