"""The API's own description: the OpenAPI schema, /openapi/v1/schema/, and the docs page, /openapi/v1/docs/ (the
schema rendered by Redoc, served from our own static files by drf-spectacular-sidecar: nothing from another host)."""

from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView

from apps.common.api.envelope import envelope_response
from apps.common.errors import ErrorCode


class ReadOnlyApiPage:
    """Contract §2: under /openapi/v1/ a method a path does not take is 1004/405 in the JSON envelope, here too
    (DRF would render its 405 with the view's own renderer: YAML for the schema, HTML for the docs page)."""

    def dispatch(self, request, *args, **kwargs):
        if request.method not in ("GET", "HEAD"):
            return envelope_response(ErrorCode.METHOD_NOT_ALLOWED)
        return super().dispatch(request, *args, **kwargs)


class ApiSchemaView(ReadOnlyApiPage, SpectacularAPIView):
    pass


# Our origin only. Redoc's sidebar shows the Redocly logo from cdn.redoc.ly (not configurable in Redoc 2): the
# browser refuses it here instead of contacting another host. Inline styles: Redoc's styled-components; blob:
# workers: its search index.
DOCS_CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                                "img-src 'self' data:; worker-src 'self' blob:; base-uri 'none'; form-action 'none'; "
                                "frame-ancestors 'none'")


class ApiDocsView(ReadOnlyApiPage, SpectacularRedocView):
    template_name = "openapi/docs.html"
    url_name = "openapi-schema"
    title = "Payment platform merchant API"

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Content-Security-Policy"] = DOCS_CONTENT_SECURITY_POLICY
        return response
