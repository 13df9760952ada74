"""Staff sign-in with a second factor (docs/staff-access.md): the admin's /admin/login/ is replaced by the shared
second-factor sign-in (apps.common.second_factor_signin) with the staff's parameters: Django's admin login form as the
password step, staff only, the admin's pages and look. The admin refuses any session that was not signed in with the
second factor (AdminRequiresSecondFactor).
"""

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.views import LoginView
from django.http import HttpResponseRedirect

from apps.common.history import admin_prefix
from apps.common.limits import OneSignInAtATime
from apps.common.second_factor_signin import (AUTHENTICATOR_NAME, RECOVERY_NAME, THROTTLED, CodeForm,  # noqa: F401
                                              SignInFlow, _devices_for, _verify, confirmed_authenticator,
                                              new_recovery_codes)

PENDING = "staff_signin_pending"  # session key: the user who gave the right password, awaiting the second factor

STAFF = SignInFlow(
    session_key=PENDING, password_url="staff-signin", code_url="staff-signin-code", enrol_url="staff-signin-enrol",
    templates="admin/signin/", home_url="admin:index", may_sign_in=lambda user: user.is_staff,
    context=lambda request: admin.site.each_context(request))


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


class StaffPasswordForm(OneSignInAtATime, AdminAuthenticationForm):
    """The admin's login form, one attempt per username at a time (apps.common.limits)."""


class PasswordStep(LoginView):
    """Step 1: Django's admin login form (staff only; django-axes counts the failures). Nobody is signed in yet."""

    authentication_form = StaffPasswordForm
    template_name = "admin/login.html"
    redirect_authenticated_user = False

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context.update(admin.site.each_context(self.request), title="Log in", subtitle=None,
                       app_path=self.request.get_full_path(), username="")
        context.setdefault("next", "")
        return context

    def dispatch(self, request, *args, **kwargs):
        if STAFF.signed_in(request):
            return HttpResponseRedirect(STAFF.next_url(request, request.GET.get("next", "")))
        return super().dispatch(request, *args, **kwargs)

    def form_valid(self, form):
        return STAFF.begin(self.request, form.get_user(), self.get_redirect_url())


password_step = PasswordStep.as_view()
code_step, enrol_step = STAFF.views()
