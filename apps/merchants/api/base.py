"""Base view of every signed endpoint: routing errors first, then signature, then business parameters."""

from django.http import HttpResponse
from rest_framework.exceptions import MethodNotAllowed
from rest_framework.views import APIView

from apps.common import signing
from apps.common.api.envelope import envelope
from apps.common.api.negotiation import JSONOnlyNegotiation
from apps.common.errors import ApiError, ErrorCode
from apps.merchants.api.authentication import COMMON_FIELDS, SignedMerchant, SignedRequestAuthentication


class SignedAPIView(APIView):
    authentication_classes = [SignedRequestAuthentication]
    content_negotiation_class = JSONOnlyNegotiation
    permission_classes: list = []
    http_method_names = ["post"]

    def initial(self, request, *args, **kwargs):
        django_request = request._request  # what DRF's Request hands these reads on to, one lookup per read
        # docs/api.md, "Checks, in order": a method the endpoint does not take is 1004 whatever the body, before any
        # signature check.
        if django_request.method.lower() not in self.http_method_names:
            raise MethodNotAllowed(django_request.method)
        # DRF reads an empty body as {}; an empty body is not a JSON object, so it is 1000 (not a missing sign).
        if not django_request.body:
            raise ApiError(ErrorCode.INVALID_REQUEST, "The body must be a JSON object.")
        super().initial(request, *args, **kwargs)

    @property
    def signed(self) -> SignedMerchant:
        return self.request.user

    def business_params(self) -> dict:
        """The body minus the signing fields, with null and empty strings treated as absent (docs/api.md, "Field
        formats")."""
        return {k: v for k, v in self.request.data.items() if k not in COMMON_FIELDS and not signing.is_absent(v)}

    def answer(self, data) -> HttpResponse:
        """The success envelope around `data`: the bytes and headers DRF's Response(envelope(data)) gives here (the
        view's one renderer, chosen whatever `Accept` says, JSONOnlyNegotiation: so never an indent), without the
        template-response machinery around them (22 us of CPU per request, docs/performance.md, "Measured changes").
        Errors still go through DRF's exception handler."""
        renderer = self.renderer_classes[0]()
        content_type = (renderer.media_type if renderer.charset is None
                        else f"{renderer.media_type}; charset={renderer.charset}")
        return HttpResponse(renderer.render(envelope(data), None, {}), content_type=content_type)

    def validated(self, serializer_class) -> dict:
        serializer = serializer_class(data=self.business_params())
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data
