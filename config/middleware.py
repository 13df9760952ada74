"""Django's browser middleware, skipped on the signed merchant API (docs/performance.md, "Measured changes").

A signed API request carries no session, no CSRF token, no signed-in user and no flash messages: it is
authenticated by its RSA2 signature alone (docs/api.md, "Signing"), its views are CSRF-exempt (DRF's APIView, the
API's 404), and it answers JSON. Yet sessions, CSRF, authentication and messages ran on every one of them: a session
store and a lazy user built, the CSRF cookie read, a message storage made, and with a browser's session cookie a session
row read and saved again (SESSION_SAVE_EVERY_REQUEST). Each of the four classes below is Django's own, and does exactly
what Django's does on every other path; on a path under BROWSERLESS_PATH_PREFIXES (the signed API, /openapi/v1/) it
passes the request straight on. So it does under SESSIONLESS_PATH_PREFIXES (the hosted pay page, /pay/): a browser page,
but the payer has no session, the page shows no user or message, and its view checks CSRF itself
(apps.collection.views._HostedPageCsrf: Django's check, run by the view's decorator). What every path still gets:
SecurityMiddleware (HSTS, nosniff, the HTTPS redirect), the request id and the request log's context, the Prometheus
histogram, CommonMiddleware, X-Frame-Options and the reference-data scope.

They stay subclasses of Django's classes, so the admin's system checks (admin.E408-E410) still find them.
"""

from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.middleware.csrf import CsrfViewMiddleware


class _BrowserOnly:
    """Runs the Django middleware it is mixed into only for paths outside BROWSERLESS_PATH_PREFIXES."""

    def __init__(self, get_response):
        super().__init__(get_response)
        # Matched against path_info, what the URLconf resolves (never request.path: SCRIPT_NAME comes from the server
        # and may come from a client's header, see apps.common.history.admin_prefix).
        self._browserless = (*settings.BROWSERLESS_PATH_PREFIXES, *settings.SESSIONLESS_PATH_PREFIXES)

    def __call__(self, request):
        if request.path_info.startswith(self._browserless):
            return self.get_response(request)
        return super().__call__(request)


class BrowserSessionMiddleware(_BrowserOnly, SessionMiddleware):
    pass


class BrowserCsrfViewMiddleware(_BrowserOnly, CsrfViewMiddleware):
    def process_view(self, request, callback, callback_args, callback_kwargs):
        # process_view is called by the handler whatever __call__ did; with process_request skipped there is no
        # token to check against. The API's views are CSRF-exempt anyway: nothing here depends on a cookie.
        if request.path_info.startswith(self._browserless):
            return None
        return super().process_view(request, callback, callback_args, callback_kwargs)


class BrowserAuthenticationMiddleware(_BrowserOnly, AuthenticationMiddleware):
    pass


class BrowserMessageMiddleware(_BrowserOnly, MessageMiddleware):
    pass
