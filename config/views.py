"""Error pages: the JSON envelope for the API and /currencies, HTML for the hosted pages and the admin."""

from django.views import defaults

from apps.common.api.exceptions import api_not_found, api_server_error

API_PREFIXES = ("/openapi/", "/currencies")


def _is_api(request) -> bool:
    return request.path.startswith(API_PREFIXES)


def not_found(request, exception=None):
    return api_not_found(request) if _is_api(request) else defaults.page_not_found(request, exception)


def server_error(request):
    return api_server_error(request) if _is_api(request) else defaults.server_error(request)
