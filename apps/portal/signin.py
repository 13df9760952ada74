"""Portal sign-in (docs/portal.md): the password, then the second factor, through the staff's mechanism
(apps.common.second_factor_signin, docs/staff-access.md) with the portal's parameters: the same django-otp devices
(TOTP, recovery codes), the same locked verification, enrolment on the first sign-in, and django-axes counting a wrong
password and a wrong code alike. Only merchant users get in here, only staff get into the admin: the password form
refuses staff, and the admin refuses anyone who is not staff."""

from django.contrib import auth
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpResponseRedirect
from django.shortcuts import redirect
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from apps.common.limits import OneSignInAtATime
from apps.common.second_factor_signin import SignInFlow
from apps.portal.access import merchant_user_of, secure

PENDING = "portal_signin_pending"  # session key: the merchant user who gave the right password

PORTAL = SignInFlow(
    session_key=PENDING, password_url="portal:signin", code_url="portal:signin-code", enrol_url="portal:signin-enrol",
    templates="portal/signin/", home_url="portal:home", next_prefix="/portal/",
    may_sign_in=lambda user: merchant_user_of(user) is not None, finish=secure)


class PasswordForm(OneSignInAtATime, AuthenticationForm):
    """Django's sign-in form (django-axes counts its failures), for active merchant users only: a staff account is
    refused here as a wrong password is (it signs in at /admin/), so the page says nothing about who is staff."""

    def confirm_login_allowed(self, user):
        super().confirm_login_allowed(user)
        if merchant_user_of(user) is None:
            raise self.get_invalid_login_error()


@sensitive_post_parameters()
@csrf_protect
@never_cache
def password_step(request):
    """Step 1: username and password. Nobody is signed in yet; the session remembers who is half-way."""
    if PORTAL.signed_in(request):
        return secure(HttpResponseRedirect(PORTAL.next_url(request, request.GET.get("next", ""))))
    form = PasswordForm(request, data=request.POST or None)
    if request.method == "POST":
        if form.is_valid():
            return PORTAL.begin(request, form.get_user(), request.POST.get("next", ""))
        if locked := PORTAL.locked_out(request):
            return locked
    return PORTAL.page(request, "password.html", {"form": form, "next": request.GET.get("next", "")})


code_step, enrol_step = PORTAL.views()


@require_POST
@csrf_protect
def sign_out(request):
    auth.logout(request)
    return secure(redirect("portal:signin"))
