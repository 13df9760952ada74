from django.urls import path

from apps.common.api.views import ApiSchemaView

urlpatterns = [path("", ApiSchemaView.as_view(), name="openapi-schema")]
