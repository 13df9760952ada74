"""The API's own description: the OpenAPI schema, /openapi/v1/schema/, and the docs page, /openapi/v1/docs/ (the
schema rendered by Redoc, served from our own static files by drf-spectacular-sidecar: nothing from another host)."""

import functools
import re
from collections import OrderedDict

import yaml

from django.contrib.staticfiles import finders
from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.renderers import (OpenApiJsonRenderer, OpenApiJsonRenderer2, OpenApiYamlRenderer,
                                       OpenApiYamlRenderer2)
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView

from apps.common.api.envelope import envelope_response
from apps.common.errors import ErrorCode


class ReadOnlyApiPage:
    """docs/api.md, "Checks, in order": under /openapi/v1/ a method a path does not take is 1004/405 in the JSON
    envelope, here too (DRF would render its 405 with the view's own renderer: YAML for the schema, HTML for the docs page)."""

    def dispatch(self, request, *args, **kwargs):
        if request.method not in ("GET", "HEAD"):
            return envelope_response(ErrorCode.METHOD_NOT_ALLOWED)
        return super().dispatch(request, *args, **kwargs)


# A string a YAML 1.2 reader takes for another type: "0012345678" (an int, 12345678: the leading zeros lost), "1e5",
# "true", "null", ... PyYAML writes YAML 1.1, where "0012345678" is a string and needs no quotes, so it wrote it plain,
# and Redoc (YAML 1.2) showed "payee_account": 12345678 on the docs page.
_YAML_12_NON_STRING = re.compile(
    r"[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?|\.inf|\.nan)"
    r"|0x[0-9a-fA-F]+|0o[0-7]+|0b[01]+|~|null|true|false|yes|no|on|off|y|n", re.IGNORECASE)


class SchemaYamlRenderer(OpenApiYamlRenderer):
    """drf-spectacular's YAML renderer, but a string a YAML 1.2 reader would take for a number, boolean or null is
    quoted ('0012345678'). Multi-line strings stay literal blocks, as drf-spectacular writes them."""

    def render(self, data, accepted_media_type=None, renderer_context=None):
        class Dumper(yaml.SafeDumper):
            def ignore_aliases(self, data):
                return True

        def string(dumper, value):
            text = str(value)
            style = "|" if "\n" in text else ("'" if _YAML_12_NON_STRING.fullmatch(text) else None)
            return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)

        Dumper.add_representer(str, string)
        Dumper.add_multi_representer(str, string)  # SafeString and other str subclasses
        Dumper.add_representer(OrderedDict, lambda dumper, value: dumper.represent_dict(dict(value)))
        return yaml.dump(data, default_flow_style=False, sort_keys=False, allow_unicode=True,
                         Dumper=Dumper).encode("utf-8")


class SchemaYamlRenderer2(SchemaYamlRenderer):
    media_type = OpenApiYamlRenderer2.media_type


class ApiSchemaView(ReadOnlyApiPage, SpectacularAPIView):
    renderer_classes = [SchemaYamlRenderer, SchemaYamlRenderer2, OpenApiJsonRenderer, OpenApiJsonRenderer2]


# Our origin only. Inline styles: Redoc's styled-components; blob:
# workers: its search index.
DOCS_CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                                "img-src 'self' data:; worker-src 'self' blob:; base-uri 'none'; form-action 'none'; "
                                "frame-ancestors 'none'")


class ApiDocsView(ReadOnlyApiPage, SpectacularRedocView):
    template_name = "openapi/docs.html"
    url_name = "openapi-schema"
    title = "Payment platform merchant API"

    @staticmethod
    def _redoc_standalone():
        return reverse("openapi-redoc-bundle")  # the sidecar's bundle without the remote logo

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Content-Security-Policy"] = DOCS_CONTENT_SECURITY_POLICY
        return response


REDOC_BUNDLE = "drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"
# Redoc 2's sidebar shows the Redocly logo from this address (not configurable); the page's own policy blocked it,
# and each visit logged a refused request to another host. An empty src fires the image's error handler, which
# removes it: the logo is dropped and nothing is requested.
REDOC_LOGO = 'src:"https://cdn.redoc.ly/redoc/logo-mini.svg"'


@functools.cache
def redoc_bundle_source() -> bytes:
    """drf-spectacular-sidecar's Redoc bundle without the remote logo (read once per process)."""
    with open(finders.find(REDOC_BUNDLE), encoding="utf-8") as bundle:
        text = bundle.read()
    return text.replace(REDOC_LOGO, 'src:""').encode("utf-8")


def redoc_bundle(request):
    """GET /openapi/v1/docs/redoc.standalone.js: the docs page's Redoc, loading nothing from another host."""
    if request.method not in ("GET", "HEAD"):
        return envelope_response(ErrorCode.METHOD_NOT_ALLOWED)
    response = HttpResponse(redoc_bundle_source(), content_type="text/javascript; charset=utf-8")
    response["Cache-Control"] = "public, max-age=3600"
    return response
