"""Portal sign-in (docs/portal.md): the password, then the second factor, as staff sign in (apps.common.staff_signin,
docs/staff-access.md): the same django-otp devices (TOTP, recovery codes), the same locked verification, enrolment on
the first sign-in, and django-axes counting a wrong password and a wrong code alike. Only merchant users get in here,
only staff get into the admin: the password form refuses staff, and the admin refuses anyone who is not staff."""

import time


from django.contrib import auth, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST
from django_otp import login as otp_login
from django_otp.plugins.otp_static.models import StaticDevice
from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.common.staff_signin import (AUTHENTICATOR_NAME, THROTTLED, CodeForm, _devices_for, _enrol_context, _failed,
                                      _locked, _verify, confirmed_authenticator, new_recovery_codes)
from apps.portal.access import merchant_user_of, secure

PENDING = "portal_signin_pending"  # session key: the merchant user who gave the right password
PENDING_SECONDS = 600


class PasswordForm(AuthenticationForm):
    """Django's sign-in form (django-axes counts its failures), for active merchant users only: a staff account is
    refused here as a wrong password is (it signs in at /admin/), so the page says nothing about who is staff."""

    def confirm_login_allowed(self, user):
        super().confirm_login_allowed(user)
        if merchant_user_of(user) is None:
            raise self.get_invalid_login_error()


def _page(request, template: str, context: dict, status: int = 200):
    return secure(render(request, f"portal/signin/{template}", context, status=status))


def _next_url(request, url: str = "") -> str:
    if url and url.startswith("/portal/") and url_has_allowed_host_and_scheme(
            url, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return url
    return reverse("portal:home")


def _locked_out_page(request):
    """Our own lockout page in place of django-axes's (the admin-styled one): the failure just recorded locked this
    username and address."""
    if getattr(request, "axes_locked_out", False):
        request.axes_locked_out = False  # answered here; AxesMiddleware would replace it with the admin's page
        return _page(request, "locked_out.html", {}, status=429)
    return None


@sensitive_post_parameters()
@csrf_protect
@never_cache
def password_step(request):
    """Step 1: username and password. Nobody is signed in yet; the session remembers who is half-way."""
    if merchant_user_of(request.user) is not None and request.user.is_verified():
        return secure(HttpResponseRedirect(_next_url(request, request.GET.get("next", ""))))
    form = PasswordForm(request, data=request.POST or None)
    if request.method == "POST":
        if form.is_valid():
            user = form.get_user()
            request.session.cycle_key()
            request.session[PENDING] = {"user": user.pk, "backend": user.backend, "at": time.time(),
                                        "next": request.POST.get("next", "")}
            step = "portal:signin-code" if confirmed_authenticator(user) else "portal:signin-enrol"
            return secure(redirect(step))
        if locked := _locked_out_page(request):
            return locked
    return _page(request, "password.html", {"form": form, "next": request.GET.get("next", "")})


def _pending_user(request):
    pending = request.session.get(PENDING)
    if not pending or time.time() - pending.get("at", 0) > PENDING_SECONDS:
        return None
    user = get_user_model().objects.filter(pk=pending["user"], is_active=True, is_staff=False,
                                           is_superuser=False).first()
    if user is None or merchant_user_of(user) is None:
        return None
    user.backend = pending["backend"]
    return user


def _sign_in(request, user, device) -> dict:
    pending = request.session.pop(PENDING)
    auth.login(request, user, backend=pending["backend"])
    otp_login(request, device)
    return pending


def _wrong_code(request, user, form, template: str, context: dict, message: str):
    _failed(request, user)
    if locked := _locked_out_page(request):
        return locked
    form.add_error("code", message)
    return _page(request, template, context)


WRONG_CODE = ("That code is not right, or was already used. Enter the current code of your authenticator app, or an "
              "unused recovery code.")


@sensitive_post_parameters()
@csrf_protect
@never_cache
def code_step(request):
    """Step 2: a code of the authenticator app, or one recovery code (used up)."""
    user = _pending_user(request)
    if user is None:
        return secure(redirect("portal:signin"))
    if confirmed_authenticator(user) is None:
        return secure(redirect("portal:signin-enrol"))
    form = CodeForm(request.POST or None)
    context = {"form": form, "username": user.get_username()}
    if request.method == "POST" and form.is_valid():
        code = form.cleaned_data["code"]
        if _locked(request, user):
            return _wrong_code(request, user, form, "code.html", context, WRONG_CODE)
        throttled, device = _verify(_devices_for(user, code), code)
        if throttled:
            form.add_error("code", THROTTLED)
            return _page(request, "code.html", context, status=429)
        if device is None:
            return _wrong_code(request, user, form, "code.html", context, WRONG_CODE)
        pending = _sign_in(request, user, device)
        if isinstance(device, StaticDevice):
            messages.warning(request, f"You signed in with a recovery code; it is used up. "
                                      f"{device.token_set.count()} left.")
        return secure(HttpResponseRedirect(_next_url(request, pending.get("next", ""))))
    return _page(request, "code.html", context)


@sensitive_post_parameters()
@csrf_protect
@never_cache
def enrol_step(request):
    """First sign-in: add the authenticator app (QR code or its secret), confirm with a code; then the recovery codes,
    shown once. A user who has an authenticator never sees this page (a stolen password enrols no second phone)."""
    user = _pending_user(request)
    if user is None:
        return secure(redirect("portal:signin"))
    if confirmed_authenticator(user) is not None:
        return secure(redirect("portal:signin-code"))
    device = _enrolling_device(request, user)
    form = CodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        if _locked(request, user):
            return _wrong_code(request, user, form, "enrol.html", _enrol_context(device, form, user), WRONG_CODE)
        throttled, confirmed = _verify([device], form.cleaned_data["code"])
        if throttled:
            form.add_error("code", THROTTLED)
            return _page(request, "enrol.html", _enrol_context(device, form, user), status=429)
        if confirmed is not None:
            confirmed.confirmed = True
            confirmed.save(update_fields=["confirmed"])
            codes = new_recovery_codes(user)
            pending = _sign_in(request, user, confirmed)
            return _page(request, "recovery_codes.html", {"codes": codes,
                                                          "next_url": _next_url(request, pending.get("next", ""))})
        return _wrong_code(request, user, form, "enrol.html", _enrol_context(device, form, user),
                           "That code is not right: check the time on your phone, and enter the code the app "
                           "shows now.")
    return _page(request, "enrol.html", _enrol_context(device, form, user))


def _enrolling_device(request, user) -> TOTPDevice:
    """This sign-in's unconfirmed authenticator (any earlier unconfirmed one is deleted: a secret of its own)."""
    pending = request.session[PENDING]
    device = TOTPDevice.objects.filter(pk=pending.get("enrol_device") or 0, user=user, confirmed=False).first()
    if device is None:
        TOTPDevice.objects.filter(user=user, confirmed=False).delete()
        device = TOTPDevice.objects.create(user=user, name=AUTHENTICATOR_NAME, confirmed=False)
        request.session[PENDING] = {**pending, "enrol_device": device.pk}
    return device


@require_POST
@csrf_protect
def sign_out(request):
    auth.logout(request)
    return secure(redirect("portal:signin"))


