from django.contrib import admin
from django.urls import include, path, re_path

from apps.common.api.exceptions import api_not_found
from apps.common.api.views import ApiDocsView, redoc_bundle
from apps.common.staff_signin import code_step, enrol_step, password_step
from config.metrics import metrics
from config.views import healthz, home
from apps.currencies.api.views import CurrencyListView

api_v1 = [
    path("", include("apps.ledger.api.urls")),
    path("", include("apps.collection.api.urls")),
    path("", include("apps.payout.api.urls")),
    path("", include("apps.callbacks.api.urls")),
    path("schema/", include("apps.common.api.urls")),
    path("docs/", ApiDocsView.as_view(), name="openapi-docs"),  # GET only; before the catch-all below
    path("docs/redoc.standalone.js", redoc_bundle, name="openapi-redoc-bundle"),
    # docs/api.md, "Checks, in order": an unknown path under /openapi/v1/ is 1004 whatever the body.
    re_path(r"^.*$", api_not_found),
]

urlpatterns = [
    path("", home, name="home"),
    path("currencies", CurrencyListView.as_view(), name="currencies"),
    path("openapi/v1/", include(api_v1)),
    re_path(r"^openapi/v1$", api_not_found),
    path("pay/", include("apps.collection.urls")),
    path("channels/", include("apps.channels.urls")),  # upstream webhooks (docs/channels.md)
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    # Staff sign-in with a second factor (apps.common.staff_signin) in place of the admin's password-only login.
    path("admin/login/", password_step, name="staff-signin"),
    path("admin/login/code/", code_step, name="staff-signin-code"),
    path("admin/login/enrol/", enrol_step, name="staff-signin-enrol"),
    path("admin/", admin.site.urls),
    path("portal/", include("apps.portal.urls")),  # the merchant's own back office (docs/portal.md)
]

handler404 = "config.views.not_found"
handler500 = "config.views.server_error"
