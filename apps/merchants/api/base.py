"""Base view of every signed endpoint: routing errors first, then signature, then business parameters."""

from rest_framework.exceptions import MethodNotAllowed
from rest_framework.views import APIView

from apps.common import signing
from apps.common.api.negotiation import JSONOnlyNegotiation
from apps.common.errors import ApiError, ErrorCode
from apps.merchants.api.authentication import COMMON_FIELDS, SignedMerchant, SignedRequestAuthentication


class SignedAPIView(APIView):
    authentication_classes = [SignedRequestAuthentication]
    content_negotiation_class = JSONOnlyNegotiation
    permission_classes: list = []
    http_method_names = ["post"]

    def initial(self, request, *args, **kwargs):
        # Contract §2: a method the endpoint does not take is 1004 whatever the body, before any signature check.
        if request.method.lower() not in self.http_method_names:
            raise MethodNotAllowed(request.method)
        # DRF reads an empty body as {}; an empty body is not a JSON object, so it is 1000 (not a missing sign).
        if not request.body:
            raise ApiError(ErrorCode.INVALID_REQUEST, "The body must be a JSON object.")
        super().initial(request, *args, **kwargs)

    @property
    def signed(self) -> SignedMerchant:
        return self.request.user

    def business_params(self) -> dict:
        """The body minus the signing fields, with null and empty strings treated as absent (contract §1)."""
        return {k: v for k, v in self.request.data.items() if k not in COMMON_FIELDS and not signing.is_absent(v)}

    def validated(self, serializer_class) -> dict:
        serializer = serializer_class(data=self.business_params())
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data
