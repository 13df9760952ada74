from drf_spectacular.utils import OpenApiExample, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.common.api.envelope import envelope
from apps.currencies.api.serializers import CurrencySerializer
from apps.currencies.selectors import currency_list


class CurrencyListView(APIView):
    """GET {api_root}/currencies: public, unsigned (docs/api.md, "Endpoints")."""

    authentication_classes: list = []
    permission_classes: list = []
    http_method_names = ["get", "head", "options"]

    @extend_schema(operation_id="currencies_list", auth=[], examples=[OpenApiExample("success", response_only=True, value={
        "code": "0", "msg": "OK", "data": {"items": [
            {"code": "PHP", "name": "Philippine Peso", "symbol": "₱", "minor_unit": 2, "active": True},
            {"code": "USD", "name": "US Dollar", "symbol": "$", "minor_unit": 2, "active": True}]}})],
        responses=inline_serializer(
        name="CurrencyListEnvelope",
        fields={"code": serializers.CharField(), "msg": serializers.CharField(),
                "data": inline_serializer(name="CurrencyList", fields={"items": CurrencySerializer(many=True)})},
    ))
    def get(self, request):
        items = CurrencySerializer(currency_list(), many=True).data
        return Response(envelope({"items": items}))
