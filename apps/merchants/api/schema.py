"""drf-spectacular: the signed-request authentication has no header to describe; the signature travels in
the JSON body (the common signed fields, documented on every request schema by apps.common.api.schema)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class SignedRequestAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "apps.merchants.api.authentication.SignedRequestAuthentication"
    name: list[str] = []  # no OpenAPI security scheme can say "in the body": none is registered

    def get_security_requirement(self, auto_schema):
        return None

    def get_security_definition(self, auto_schema):
        return []
