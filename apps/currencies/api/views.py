from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.common.api.envelope import envelope
from apps.currencies.api.serializers import CurrencySerializer
from apps.currencies.selectors import currency_list


class CurrencyListView(APIView):
    """GET {api_root}/currencies: public, unsigned (interface §4.2)."""

    authentication_classes: list = []
    permission_classes: list = []
    http_method_names = ["get", "head", "options"]

    @extend_schema(operation_id="currencies_list", responses=CurrencySerializer(many=True))
    def get(self, request):
        items = CurrencySerializer(currency_list(), many=True).data
        return Response(envelope({"items": items}))
